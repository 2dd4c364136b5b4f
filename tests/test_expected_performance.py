"""The ``expected-performance`` gate signal on the shipped client runs (fixtures/realdata/clients,
SOURCES.txt: baseline ITL 15 ms, candidate_slow 18 ms): with the mock server's deployment and the
factors ``timing fit`` gives on the baseline, the slow candidate holds on ITL and the baseline gated
against itself promotes; bad options are errors located at the signal's options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from tickgate.gate.pipeline import gate_files
from tickgate.testing import fresh_registry
from tickgate.testing.io_contracts import synthetic_run
from tickgate.util.errors import InputError

CLIENTS = FIXTURES / "realdata" / "clients"
VLLM = CLIENTS / "vllm_bench_serve_0.33"
SGLANG = CLIENTS / "sglang_bench_serving_0.5.23"
DEPLOYMENT = FIXTURES / "calibrate" / "mock-server.yaml"
#: what `tickgate timing fit vllm_openai_baseline.json --deployment mock-server.yaml` writes
FITTED = """\
timing:
  name: linear
  options:
    fixed_ms: 15.2
    per_prefill_token_ms: 0.0507
    per_decode_seq_ms: 0.001454
    per_context_token_ms: 3.776e-05
    frontend_ms: 17.96
"""


def policy(tmp_path: Path, options: object) -> Path:
    path = tmp_path / "gate.yaml"
    doc = {"version": 1, "gate": {"seed": 3, "signals": [{"name": "expected-performance", "options": options}]}}
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.fixture
def fitted(tmp_path: Path) -> Path:
    path = tmp_path / "fitted.yaml"
    path.write_text(FITTED)
    return path


def gate(tmp_path: Path, options: object, baseline: Path, candidate: Path) -> dict:
    fresh_registry()
    report = gate_files(policy(tmp_path, options), baseline=baseline, candidate=candidate)
    (signal,) = report["signals"]
    return signal


def test_slow_candidate_holds_on_itl(tmp_path: Path, fitted: Path) -> None:
    options = {"deployment": str(DEPLOYMENT), "timing": str(fitted)}
    signal = gate(tmp_path, options, VLLM / "vllm_openai_baseline.json", VLLM / "vllm_openai_candidate_slow.json")
    assert signal["status"] == "hold" and signal["reason"] == "regression", signal
    details = signal["details"]
    assert details["over_threshold"] == ["itl_p50", "itl_p95"]  # TTFT is unchanged on the slow server
    itl = details["metrics"]["itl_p50"]
    assert itl["ratio"] == pytest.approx(itl["measured"] / itl["predicted"], rel=1e-5)
    assert 1.15 < itl["ratio"] < 1.25  # 18 ms against a fit to 15 ms
    assert itl["ci"][0] <= itl["ratio"] <= itl["ci"][1]
    assert details["worst"] in signal["message"] and "measured" in signal["message"] and "predicted" in signal["message"]
    assert signal["confidence_interval"][0] > signal["threshold"]
    assert signal["evidence"]["requests"] == 200


def test_baseline_against_itself_promotes(tmp_path: Path, fitted: Path) -> None:
    run = VLLM / "vllm_openai_baseline.json"
    signal = gate(tmp_path, {"deployment": str(DEPLOYMENT), "timing": str(fitted)}, run, run)
    assert signal["status"] == "pass", signal
    for figure in signal["details"]["metrics"].values():
        assert abs(figure["ratio"] - 1) < 0.1, figure


def test_only_the_candidate_is_replayed(tmp_path: Path, fitted: Path) -> None:
    """No baseline of the same traffic is needed: a slow candidate holds against any baseline, and
    the baseline passes gated as the candidate of the slow run."""
    options = {"deployment": str(DEPLOYMENT), "timing": str(fitted), "metrics": ["itl_p50"]}
    slow, base = SGLANG / "sglang_vllm_candidate_slow.jsonl", SGLANG / "sglang_vllm_baseline.jsonl"
    assert gate(tmp_path, options, base, slow)["status"] == "hold"
    assert gate(tmp_path, options, slow, base)["status"] == "pass"


def test_a_file_that_is_not_a_client_run_holds(tmp_path: Path) -> None:
    neutral = tmp_path / "run.json"
    neutral.write_text(json.dumps(synthetic_run("same", [f"q{i:03d}" for i in range(60)])))
    signal = gate(tmp_path, {"deployment": str(DEPLOYMENT)}, neutral, neutral)
    assert signal["status"] == "hold" and signal["reason"] == "missing_evidence", signal


def test_relative_paths_resolve_against_the_current_directory(
    tmp_path: Path, fitted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.yaml").write_text(DEPLOYMENT.read_text())
    run = VLLM / "vllm_openai_baseline.json"
    assert gate(tmp_path, {"deployment": "d.yaml", "timing": "fitted.yaml"}, run, run)["status"] == "pass"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({}, "deployment"),
        ({"deployment": "no-such.yaml"}, "file not found"),
        ({"deployment": str(DEPLOYMENT), "timing": "no-such.yaml"}, "file not found"),
        ({"deployment": str(DEPLOYMENT), "threshold": -1}, "minimum"),
        ({"deployment": str(DEPLOYMENT), "metrics": ["itl_p99"]}, "itl_p99"),
        ({"deployment": str(FIXTURES / "realdata" / "clients" / "SOURCES.txt")}, "mapping"),
    ],
)
def test_bad_options_are_located_errors(tmp_path: Path, options: dict, words: str) -> None:
    run = VLLM / "vllm_openai_baseline.json"
    with pytest.raises(InputError) as caught:
        gate(tmp_path, options, run, run)
    assert caught.value.line is not None, caught.value
    assert (caught.value.json_path or "").startswith("$.gate.signals[0].options"), caught.value
    assert words in str(caught.value)


def test_a_timing_file_for_another_model_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "roofline.yaml"
    other.write_text("timing:\n  name: roofline\n  options: {}\n")
    run = VLLM / "vllm_openai_baseline.json"
    with pytest.raises(InputError) as caught:
        gate(tmp_path, {"deployment": str(DEPLOYMENT), "timing": str(other)}, run, run)
    assert "roofline" in str(caught.value) and caught.value.json_path.startswith("$.gate.signals[0].options")


def test_cli_exit_codes(tmp_path: Path, fitted: Path) -> None:
    path = policy(tmp_path, {"deployment": str(DEPLOYMENT), "timing": str(fitted)})
    base, slow = VLLM / "vllm_openai_baseline.json", VLLM / "vllm_openai_candidate_slow.json"
    args = ("gate", "--policy", str(path), "--baseline", str(base), "--output", str(tmp_path / "r.json"))
    assert run_cli(*args, "--candidate", str(slow)).returncode == 10
    assert run_cli(*args, "--candidate", str(base)).returncode == 0
    bad = policy(tmp_path, {"deployment": "no-such.yaml"})
    res = run_cli("gate", "--policy", str(bad), "--baseline", str(base), "--candidate", str(base), "--output", str(tmp_path / "x.json"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and "$.gate.signals[0].options" in res.stderr


def test_the_report_is_the_same_under_any_hash_seed(tmp_path: Path, fitted: Path) -> None:
    """The bootstrap is seeded from the gate's seed: the same files give the same report bytes."""
    path = policy(tmp_path, {"deployment": str(DEPLOYMENT), "timing": str(fitted)})
    base, slow = VLLM / "vllm_openai_baseline.json", VLLM / "vllm_openai_candidate_slow.json"
    reports = []
    for seed in ("1", "2"):
        out = tmp_path / f"r{seed}.json"
        args = ("gate", "--policy", str(path), "--baseline", str(base), "--candidate", str(slow), "--output", str(out))
        assert run_cli(*args, env={"PYTHONHASHSEED": seed}).returncode == 10
        reports.append(out.read_bytes())
    assert reports[0] == reports[1]
