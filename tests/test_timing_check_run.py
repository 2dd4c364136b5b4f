"""``tickgate timing check RUN --deployment D.yaml`` (docs/timing.md, "Checking against your own run")
on the real client files (fixtures/realdata/clients: all four formats record per-request TTFT, ITL and
E2E), copies edited the way each tool writes a failed request, and bad deployment files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_files_helpers import aiperf_with_errors, vllm_with_errors

from conftest import FIXTURES, run_cli
from tickgate.commands.cli import main
from tickgate.gate.detect import read_observations
from tickgate.util.quantile import quantile

CLIENTS = FIXTURES / "realdata" / "clients"
DEPLOYMENT = FIXTURES / "calibrate" / "mock-server.yaml"
AIPERF_DIR = CLIENTS / "aiperf_0.13" / "aiperf_chat_baseline"
GENAI_DIR = CLIENTS / "genai_perf_0.0.16" / "genaiperf_chat_baseline" / "mock-model-openai-chat-request_rate8.0"
RUNS = {
    "vllm-bench": CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json",
    "sglang-bench": CLIENTS / "sglang_bench_serving_0.5.23" / "sglang_vllm_baseline.jsonl",
    "aiperf": AIPERF_DIR / "profile_export.jsonl",
    "genai-perf": GENAI_DIR / "profile_export.json",
}


def check(
    capsys: pytest.CaptureFixture[str], run: Path, out: Path, *extra: str, deployment: Path = DEPLOYMENT
) -> tuple[int, str]:
    code = main(["timing", "check", str(run), "--deployment", str(deployment), "--output", str(out), *extra])
    _, err = capsys.readouterr()
    return code, err


def checked(capsys: pytest.CaptureFixture[str], run: Path, tmp_path: Path, *extra: str, **kw: Any) -> Any:
    out = tmp_path / "check.json"
    code, err = check(capsys, run, out, *extra, **kw)
    assert code == 0, err
    return json.loads(out.read_text())


def edited(tmp_path: Path, **values: float) -> Path:
    """The shipped deployment with some of its options (each on a line of its own) changed."""
    text = DEPLOYMENT.read_text()
    for key, value in values.items():
        start = text.index(f"    {key}: ")
        end = text.index("\n", start)
        text = text[:start] + f"    {key}: {value}" + text[end:]
    path = tmp_path / "deployment.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("fmt", sorted(RUNS))
def test_every_request_is_joined_and_the_measured_side_is_the_mirrors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    doc = checked(capsys, RUNS[fmt], tmp_path)  # --format auto finds the client
    assert doc["format"] == fmt
    observed = read_observations(RUNS[fmt])["requests"]
    assert doc["requests"] == {"in_run": len(observed), "imported": len(observed), "joined": len(observed)}
    assert sorted(r["id"] for r in doc["per_request"]) == sorted(str(o["request_id"]) for o in observed)
    assert doc["flags"] == []
    ttfts = sorted(o["ttft_ms"] for o in observed)
    measured = doc["summary"]["ttft_ms"]["measured"]
    assert measured["p50"] == pytest.approx(quantile(ttfts, 0.5), rel=1e-6)
    assert measured["p99"] == pytest.approx(quantile(ttfts, 0.99), rel=1e-6)
    assert measured["mean"] == pytest.approx(sum(ttfts) / len(ttfts), rel=1e-6)
    e2e = sorted(o["latency_ms"] for o in observed)
    assert doc["summary"]["e2e_ms"]["measured"]["p95"] == pytest.approx(quantile(e2e, 0.95), rel=1e-6)
    aggregate = read_observations(RUNS[fmt])["run"]["aggregates"]["ttft_ms"]
    assert measured["p50"] == pytest.approx(aggregate["median"], rel=1e-6)  # the client's own median
    one = next(r for r in doc["per_request"] if r["id"] == str(observed[0]["request_id"]))
    assert one["measured"]["ttft_ms"] == pytest.approx(observed[0]["ttft_ms"], rel=1e-5)
    gaps = observed[0]["itl_ms"]
    assert one["measured"]["itl_ms"] == pytest.approx(sum(gaps) / len(gaps), rel=1e-5)
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        block = doc["summary"][metric]
        assert set(block["measured"]) == set(block["predicted"]) == {"mean", "p50", "p95", "p99"}
        assert "mdape" in block and "bias" in block


def test_the_predicted_side_is_the_replays(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = RUNS["vllm-bench"]
    before = checked(capsys, run, tmp_path)
    slower = checked(capsys, run, tmp_path, deployment=edited(tmp_path, fixed_ms=18.0))
    assert slower["summary"]["ttft_ms"]["measured"] == before["summary"]["ttft_ms"]["measured"]
    ratio = slower["summary"]["itl_ms"]["predicted"]["p50"] / before["summary"]["itl_ms"]["predicted"]["p50"]
    assert ratio == pytest.approx(18 / 15, rel=0.02)  # decode steps cost fixed_ms on a lone server
    assert slower["summary"]["itl_ms"]["bias"] > before["summary"]["itl_ms"]["bias"]
    # the prefill step prices 0.05 ms per prompt token: TTFT grows with the prompt
    rows = sorted(before["per_request"], key=lambda r: r["predicted"]["e2e_ms"])
    assert rows[0]["predicted"]["ttft_ms"] < before["summary"]["ttft_ms"]["measured"]["mean"]


def test_timing_file_replaces_the_deployments_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fitted = tmp_path / "fitted.yaml"
    fitted.write_text("timing:\n  name: linear\n  options:\n    fixed_ms: 18.0\n    per_prefill_token_ms: 0.05\n")
    run = RUNS["aiperf"]
    base = checked(capsys, run, tmp_path)
    doc = checked(capsys, run, tmp_path, "--timing", str(fitted))
    assert doc["timing"] == str(fitted)
    assert doc["summary"]["itl_ms"]["predicted"]["p50"] > base["summary"]["itl_ms"]["predicted"]["p50"] * 1.15
    fitted.write_text("timing:\n  name: linear\n  options:\n    fixed_ms: -1\n")
    out = tmp_path / "bad.json"
    code, err = check(capsys, run, out, "--timing", str(fitted))
    assert code == 2 and str(fitted) in err and "timing.options.fixed_ms" in err and not out.exists()
    fitted.write_text("timing:\n  name: roofline\n  options: {}\n")
    code, err = check(capsys, run, out, "--timing", str(fitted))
    assert code == 2 and str(fitted) in err and "'linear'" in err and not out.exists()


@pytest.mark.parametrize(
    ("fmt", "edit", "failed"),
    [
        ("vllm-bench", lambda src, out: vllm_with_errors(src, out / "run.json"), ["00000", "00025"]),
        (
            "aiperf",
            lambda src, out: aiperf_with_errors(src, out / "profile_export.jsonl"),
            None,
        ),
    ],
)
def test_failed_requests_are_flagged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str, edit: Any, failed: list[str] | None
) -> None:
    run = edit(RUNS[fmt], tmp_path)
    doc = checked(capsys, run, tmp_path, "--format", fmt)
    observed = read_observations(run)["requests"]
    errors = [str(o["request_id"]) for o in observed if o.get("error")]
    assert errors and (failed is None or errors[:2] == failed)
    assert [f["id"] for f in doc["flags"] if f["kind"] == "failed"] == sorted(errors)
    assert doc["requests"]["joined"] == len(observed) - len(errors) == doc["requests"]["imported"]
    assert not {r["id"] for r in doc["per_request"]} & set(errors)


def test_output_lengths_and_cache_hits_the_run_does_not_show_are_flagged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a KV pool too small for the longest requests: the replay preempts or rejects what the run served
    small = edited(tmp_path, num_gpu_blocks=12, max_num_seqs=1)
    doc = checked(capsys, RUNS["vllm-bench"], tmp_path, deployment=small)
    kinds = {f["kind"] for f in doc["flags"]}
    assert kinds & {"not-completed", "output-length"}, doc["flags"][:3]
    assert doc["requests"]["joined"] < doc["requests"]["in_run"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("version: 1\nscheduler: {name: vllm-v1}\n", "$.timing"),
        ("version: 1\ntiming: {name: linear}\n", "$.scheduler"),
        ("- not a mapping\n", "bad.yaml:1:"),
        (DEPLOYMENT.read_text().replace("fixed_ms: 15.0", "fixed_ms: fast"), "fixed_ms"),
        (DEPLOYMENT.read_text().replace("max_num_seqs: 1024", "max_num_seqs: 0"), "max_num_seqs"),
    ],
)
def test_a_bad_deployment_is_one_located_error_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, where: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    out = tmp_path / "check.json"
    code, err = check(capsys, RUNS["sglang-bench"], out, deployment=bad)
    assert code == 2, err
    assert str(bad) in err and where in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_file_that_is_no_client_run_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    code, err = check(capsys, RUNS["vllm-bench"], out, "--format", "points")
    assert code == 2 and "--deployment" in err and not out.exists()
    garbage = tmp_path / "run.json"
    garbage.write_text("{}")
    code, err = check(capsys, garbage, out, "--format", "vllm-bench")
    assert code == 2 and str(garbage) in err and not out.exists()


def test_check_json_is_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    outs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"check{seed}.json"
        result = run_cli(
            "timing", "check", str(RUNS["genai-perf"]), "--deployment", str(DEPLOYMENT), "--output", str(out),
            env={"PYTHONHASHSEED": seed},
        )
        assert result.returncode == 0, result.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
