"""``tickgate generate``: synthetic workloads drawn as vllm bench serve draws its random dataset
and its request times, byte-deterministic, replayable by ``tickgate replay``."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import POLICIES, run_cli

from tickgate.workload.generate import LengthRange, generate, sample_lengths, send_times_s
from tickgate.workload.format import read_workload


def gen(tmp_path: Path, *args: str, name: str = "w.json", env: dict[str, str] | None = None) -> Path:
    out = tmp_path / name
    res = run_cli("generate", *args, "--output", str(out), "--quiet", env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    return out


def lines(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = json.loads(path.read_text())
    return {k: v for k, v in doc.items() if k != "requests"}, doc["requests"]


# -- determinism ---------------------------------------------------------------------------------

ARGS = ("--requests", "300", "--input-len", "64:1024", "--output-len", "16:256", "--rate", "7.5",
        "--burstiness", "0.7", "--concurrency", "12", "--seed", "42")
#: sha256 of the file ARGS write: numpy's RandomState streams are frozen, so this holds on any install
PINNED = "99151c34325af8262c9b142c33c72d0e85f76ca5ed5d95c680b35c46f21b0784"


def test_same_arguments_same_bytes_in_any_process(tmp_path: Path) -> None:
    a = gen(tmp_path, *ARGS, name="a.json", env={"PYTHONHASHSEED": "0"})
    b = gen(tmp_path, *ARGS, name="b.json", env={"PYTHONHASHSEED": "4242"})
    assert a.read_bytes() == b.read_bytes()
    assert hashlib.sha256(a.read_bytes()).hexdigest() == PINNED
    c = gen(tmp_path, *ARGS[:-1], "43", name="c.json")
    assert c.read_bytes() != a.read_bytes()  # and the seed matters


def test_the_file_is_a_workload_replay_reads(tmp_path: Path) -> None:
    path = gen(tmp_path, *ARGS)
    workload = read_workload(path)
    assert workload.header.max_concurrency == 12
    requests = list(workload.requests)
    assert len(requests) == 300
    assert [r.id for r in requests] == [f"req-{i:03d}" for i in range(300)]
    header, _ = lines(path)
    assert header["source"] == {"generator": "tickgate generate", "requests": 300, "input_len": [64, 1024],
                                "output_len": [16, 256], "seed": 42, "rate": 7.5, "burstiness": 0.7,
                                "max_concurrency": 12}
    out, trace = tmp_path / "r.json", tmp_path / "t.jsonl"
    res = run_cli("replay", "--input", str(path), "--policy", str(POLICIES / "vllm-v1-bench.yaml"),
                  "--output", str(out), "--trace", str(trace), "--quiet")
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["inputs"]["max_concurrency"] == 12
    assert report["requests"]["completed"] == 300
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert max(r["active"] + r["queued"] for r in records) == 12


# -- the same draws as vLLM ----------------------------------------------------------------------

def vllm_legacy_lengths(n: int, inputs: tuple[int, int], outputs: tuple[int, int], seed: int) -> tuple[Any, Any]:
    """What vLLM's RandomDataset.sample draws from the global generator after
    ``np.random.seed(seed)`` (benchmarks/benchmark_dataset.py): inputs, then outputs."""
    np.random.seed(seed)
    input_lens = np.random.randint(inputs[0], inputs[1] + 1, size=n)
    output_lens = np.random.randint(outputs[0], outputs[1] + 1, size=n)
    return input_lens.tolist(), output_lens.tolist()


def vllm_send_times(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """vllm/benchmarks/serve.py (0.33) ``get_request`` without ramp-up: one scalar gamma draw per
    request from ``np.random`` seeded in ``main_async``, a running sum, the last pinned at n / rate."""
    np.random.seed(seed)
    delays: list[Any] = []
    for _ in range(n):
        if rate == float("inf"):
            delays.append(0)
        elif burstiness == float("inf"):
            delays.append(1.0 / rate)
        else:
            delays.append(np.random.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)))
    for i in range(1, len(delays)):
        delays[i] += delays[i - 1]
    if delays[-1] != 0:
        factor = (n / rate) / delays[-1]
        delays = [d * factor for d in delays]
    return [float(d) for d in delays]


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1])
def test_lengths_are_vllm_legacy_random_dataset_draws(seed: int) -> None:
    ours = sample_lengths(500, LengthRange(32, 2048), LengthRange(1, 300), seed)
    assert ours == vllm_legacy_lengths(500, (32, 2048), (1, 300), seed)


@pytest.mark.parametrize("rate,burstiness", [(4.0, 1.0), (0.5, 0.25), (100.0, 3.0), (8.0, float("inf"))])
def test_send_times_are_vllm_get_request(rate: float, burstiness: float) -> None:
    for seed in (0, 7):
        assert send_times_s(400, rate, burstiness, seed) == vllm_send_times(400, rate, burstiness, seed)


def test_arrivals_in_the_file_are_vllm_send_times_in_ms(tmp_path: Path) -> None:
    path = gen(tmp_path, "--requests", "200", "--input-len", "128", "--output-len", "64", "--rate", "8",
               "--seed", "3")
    _, requests = lines(path)
    assert [r["arrival_ms"] for r in requests] == [round(t * 1000.0, 3) for t in vllm_send_times(200, 8.0, 1.0, 3)]
    assert requests[-1]["arrival_ms"] == 25000.0  # vLLM pins the last at N / rate seconds
    assert {r["prompt_tokens"] for r in requests} == {128} and {r["max_output_tokens"] for r in requests} == {64}


def test_a_large_workload_is_the_same_draws_across_its_chunks() -> None:
    n = 70_000  # more than one chunk of requests built at a time
    header, stream = generate(n, LengthRange(1, 4000), LengthRange(1, 900), seed=5, rate=300.0, burstiness=0.6)
    requests = list(stream)
    assert [r.id for r in requests[65535:65538]] == ["req-65535", "req-65536", "req-65537"]
    inputs, outputs = vllm_legacy_lengths(n, (1, 4000), (1, 900), 5)
    assert [r.prompt_tokens for r in requests] == inputs and [r.max_output_tokens for r in requests] == outputs
    assert [r.arrival_ms for r in requests] == [round(t * 1000.0, 3) for t in vllm_send_times(n, 300.0, 0.6, 5)]


# -- the distributions ---------------------------------------------------------------------------

def test_lengths_are_uniform_over_the_inclusive_range() -> None:
    n, low, high = 40_000, 100, 199
    inputs, outputs = sample_lengths(n, LengthRange(low, high), LengthRange(5, 8), seed=11)
    assert min(inputs) == low and max(inputs) == high  # both ends are drawn
    assert set(outputs) == {5, 6, 7, 8}
    counts = np.bincount(np.asarray(inputs) - low, minlength=high - low + 1)
    expected = n / (high - low + 1)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 148.2  # 99 degrees of freedom: p = 0.001
    assert abs(np.mean(inputs) - (low + high) / 2) < 0.3
    assert abs(np.mean(outputs) - 6.5) < 0.02


def test_a_fixed_length_is_that_length() -> None:
    inputs, outputs = sample_lengths(1000, LengthRange(512, 512), LengthRange(1, 1), seed=5)
    assert set(inputs) == {512} and set(outputs) == {1}


def _gaps_ms(rate: float, burstiness: float, n: int = 6000, seed: int = 9) -> np.ndarray:
    header, requests = generate(n, LengthRange(10, 10), LengthRange(5, 5), seed=seed, rate=rate,
                                burstiness=burstiness)
    times = np.asarray([r.arrival_ms for r in requests])
    assert (np.diff(times) >= 0).all()
    return np.diff(times)


def test_mean_inter_arrival_is_one_over_the_rate() -> None:
    gaps = _gaps_ms(rate=20.0, burstiness=1.0)
    assert abs(gaps.mean() - 50.0) < 1.0  # 1000 / rate ms
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05  # exponential intervals: CV 1


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_burstiness_changes_the_variance_not_the_mean(burstiness: float) -> None:
    poisson, shaped = _gaps_ms(20.0, 1.0), _gaps_ms(20.0, burstiness)
    assert abs(shaped.mean() - 50.0) < 1.5
    # gamma intervals of shape k: CV = 1 / sqrt(k); burstier (k < 1) spreads them more
    assert abs(shaped.std() / shaped.mean() - 1 / math.sqrt(burstiness)) < 0.1 / math.sqrt(burstiness)
    assert (shaped.var() > poisson.var()) == (burstiness < 1)


def test_infinite_burstiness_spaces_requests_evenly(tmp_path: Path) -> None:
    path = gen(tmp_path, "--requests", "50", "--input-len", "8", "--output-len", "2", "--rate", "4",
               "--burstiness", "inf")
    _, requests = lines(path)
    assert [r["arrival_ms"] for r in requests] == [round(250.0 * (i + 1), 3) for i in range(50)]


@pytest.mark.parametrize("how", [("--rate", "inf"), ("--concurrency", "3"), ("--rate", "inf", "--concurrency", "3")])
def test_without_a_finite_rate_everything_arrives_at_once(tmp_path: Path, how: tuple[str, ...]) -> None:
    path = gen(tmp_path, "--requests", "20", "--input-len", "8:16", "--output-len", "2", *how)
    header, requests = lines(path)
    assert all("arrival_ms" not in r and r["arrival_tick"] == 0 for r in requests)
    assert header.get("max_concurrency") == (3 if "--concurrency" in how else None)


def test_rate_and_concurrency_together(tmp_path: Path) -> None:
    path = gen(tmp_path, "--requests", "40", "--input-len", "32", "--output-len", "8", "--rate", "50",
               "--concurrency", "2", "--seed", "1")
    header, requests = lines(path)
    assert header["max_concurrency"] == 2
    assert [r["arrival_ms"] for r in requests] == [round(t * 1000, 3) for t in vllm_send_times(40, 50.0, 1.0, 1)]


def test_a_shared_prefix_is_shared_prefix_blocks(tmp_path: Path) -> None:
    path = gen(tmp_path, "--requests", "10", "--input-len", "100:200", "--output-len", "8", "--rate", "2",
               "--prefix-len", "70", "--block-size", "16")
    header, requests = lines(path)
    assert header["block_size"] == 16 and header["source"]["prefix_len"] == 70
    plain = gen(tmp_path, "--requests", "10", "--input-len", "100:200", "--output-len", "8", "--rate", "2",
                name="plain.json")
    for r, p in zip(requests, lines(plain)[1]):
        assert r["prompt_tokens"] == p["prompt_tokens"] + 70  # the same sampled lengths, after the prefix
        assert r["prefix_block_runs"] == [[0, 4]]  # its 4 whole blocks, the same ids in every prompt
        assert "prefix_block_runs" not in p and "prefix_blocks" not in p


# -- bad arguments -------------------------------------------------------------------------------

BASE = ["--requests", "10", "--input-len", "16", "--output-len", "4"]


@pytest.mark.parametrize("args,message", [
    (["--rate", "0"], "Invalid value for '--rate': '0': give a number above 0 (or inf)"),
    (["--rate", "nan"], "Invalid value for '--rate': 'nan': give a number above 0 (or inf)"),
    (["--rate", "fast"], "Invalid value for '--rate': 'fast' is not a number"),
    (["--rate", "2", "--burstiness", "-1"], "Invalid value for '--burstiness': '-1': give a number above 0"),
    (["--burstiness", "2"], "--burstiness shapes the arrivals of --rate or --rate-profile: give one of them too"),
    ([], "give --rate (or --rate-profile), --concurrency or both"),
    (["--rate", "1", "--input-len", "9:3"], "Invalid value for '--input-len': '9:3': the range ends before it starts"),
    (["--rate", "1", "--output-len", "0"], "Invalid value for '--output-len': '0': lengths start at 1"),
    (["--rate", "1", "--input-len", "1:2:3"], "'1:2:3' is not a length A or a range A:B of whole numbers"),
    (["--rate", "1", "--input-len", "²"], "'²' is not a length A or a range A:B of whole numbers"),
    (["--rate", "1", "--input-len", "10000000"], "can reach 10,000,004 tokens; a request has at most 10,000,000"),
    (["--concurrency", "0"], "Invalid value for '--concurrency': 0 is not in the range 1<=x<=1000000000"),
    (["--rate", "1", "--seed", "-3"], "Invalid value for '--seed': -3 is not in the range 0<=x<=4294967295"),
    (["--rate", "1", "--requests", "0"], "Invalid value for '--requests': 0 is not in the range"),
    # issue 32's battery: an input length of 0, a negative rate, a billion requests (at most ten million,
    # drawn in memory at 24 bytes a request: docs/workload.md)
    (["--rate", "1", "--input-len", "0"], "Invalid value for '--input-len': '0': lengths start at 1"),
    (["--rate", "-3"], "Invalid value for '--rate': '-3': give a number above 0 (or inf)"),
    (["--rate", "1", "--requests", "1000000000"],
     "Invalid value for '--requests': 1000000000 is not in the range 1<=x<=10000000"),
    (["--rate", "1e-12"], "--requests 10 at --rate 1e-12 end after 1e+15 ms"),
])
def test_bad_arguments_are_one_located_line(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "w.json"
    res = run_cli("generate", *BASE, *args, "--output", str(out))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert message in res.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing written, not even a temporary


def test_an_unwritable_output_is_refused_before_any_work(tmp_path: Path) -> None:
    res = run_cli("generate", *BASE, "--rate", "1", "--output", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {tmp_path}: cannot write: it is a directory"


def test_a_failed_run_leaves_an_existing_file_alone(tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    out.write_text("keep me")
    res = run_cli("generate", *BASE, "--rate", "-2", "--output", str(out))
    assert res.returncode == 2 and out.read_text() == "keep me"


def test_it_says_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    res = run_cli("generate", *BASE, "--rate", "4", "--burstiness", "0.5", "--concurrency", "2", "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("generated by tickgate generate: 10 requests, input 16 tokens, output 4 tokens, "
                          f"gamma (burstiness 0.5) arrivals at 4 req/s, at most 2 in flight, seed 0 -> {out}\n")
    assert json.loads(out.read_text())["description"] == res.stdout.split(" -> ")[0]


def test_numpy_is_imported_only_to_generate() -> None:
    """Every other command stays as fast to start as before numpy became a dependency."""
    import subprocess
    import sys

    code = ("import sys, tickgate.commands.cli, tickgate.commands.generate, tickgate.workload.generate, tickgate.replay; "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
