"""Release gate: every fixture's documented decision, exit codes, report
contents, determinism and the statistical acceptance cases."""

from __future__ import annotations

import copy
import json
import random
import sys
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES, run_cli

sys.path.insert(0, str(FIXTURES / "gate"))
import generate  # noqa: E402  (the fixture generator: same shapes as the fixtures)

EXPECTED = json.loads((FIXTURES / "gate" / "expected.json").read_text())


@pytest.fixture(autouse=True)
def _core_plugins_only(monkeypatch):
    """The gate's built-ins arrive through the core distribution's entry points;
    adapters under development elsewhere in the tree must not change these results."""
    monkeypatch.setenv("TICKGATE_PLUGINS", "tickgate")


def gate(fixture: str, policy: str = "gate-default.yaml") -> dict[str, Any]:
    from tickgate.gate.pipeline import gate_files

    return gate_files(POLICIES / policy, bundle=FIXTURES / fixture)


def gate_docs(base: dict[str, Any], cand: dict[str, Any], policy: str = "gate-default.yaml") -> dict[str, Any]:
    from tickgate.gate.pipeline import run_gate
    from tickgate.gate.config import load_gate_config
    from tickgate.gate.observations import side_from_document
    from tickgate.host.policy import load_policy

    config = load_gate_config(load_policy(POLICIES / policy))
    return run_gate(side_from_document(base, "baseline", "b.json"),
                    side_from_document(cand, "candidate", "c.json"), config)


def doc(requests: list[dict[str, Any]] | None, **run: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"version": 1, "kind": "tickgate.observations", "run": {"backend": "vllm", **run}}
    if requests is not None:
        out["requests"] = requests
    return out


def signal(report: dict[str, Any], sid: str) -> dict[str, Any]:
    return next(s for s in report["signals"] if s["id"] == sid)


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_fixture_gives_its_documented_decision_and_names_its_signal(fixture):
    expected = EXPECTED[fixture]
    report = gate(fixture, expected["policy"])
    assert report["decision"] == expected["decision"]
    assert report["exit_code"] == {"promote": 0, "hold": 10, "rollback": 20}[expected["decision"]]
    triaged = {t["signal"] for t in report["triage"]}
    if expected["signal"] is None:
        assert report["triage"] == []
        assert all(s["status"] in ("pass", "not_evaluated") for s in report["signals"])
    else:
        assert expected["signal"] in triaged
        assert signal(report, expected["signal"])["status"] == report["decision"].replace("promote", "pass")


def test_bad_release_rolls_back_with_both_signals_and_the_ids_to_diff():
    report = gate("release_gate_bad.json")
    assert report["decision"] == "rollback"
    triage = {t["signal"]: t for t in report["triage"]}
    assert triage["output-mismatch"]["status"] == "rollback"
    assert "req-00017" in triage["output-mismatch"]["next_action"]
    assert triage["error-rate"]["status"] == "rollback"
    assert "req-00042" in triage["error-rate"]["next_action"]
    errors = signal(report, "error-rate")
    assert errors["evidence"] == {"baseline_errors": 0, "candidate_errors": 1, "matched": 240, "min_pairs": 1,
                                  "new_errors": 1}
    assert errors["candidate"] == round(1 / 240, 6)
    assert errors["details"]["candidate_errors"]["req-00042"].startswith("HTTP 500")
    mismatch = signal(report, "output-mismatch")
    assert mismatch["evidence"]["mismatched"] == 1 and mismatch["evidence"]["compared"] == 239


def test_safe_release_promotes_with_every_signal_reported():
    report = gate("release_gate_safe.json")
    assert report["decision"] == "promote"
    assert [s["id"] for s in report["signals"]] == [
        "output-mismatch", "error-rate", "latency-p95", "ttft-p95", "decode-token-p95", "memory-pressure",
        "throughput", "prefix-cache-hit-rate", "matched-traffic"]
    latency = signal(report, "latency-p95")
    lo, hi = latency["confidence_interval"]
    assert lo <= latency["delta"] <= hi and latency["threshold"] == 0.1
    assert latency["evidence"]["used"] == 240 and latency["evidence"]["min_pairs"] == 200
    assert set(report["segments"]) == {"accelerator", "backend", "model", "route", "scheduler"}
    assert report["segments"]["model"]["qwen2.5-7b"]["pairs"] == 120


def test_segment_regression_is_named_when_the_total_is_within_threshold():
    report = gate("gate/segment_regression.json")
    latency = signal(report, "latency-p95")
    assert latency["delta"] < latency["threshold"]  # the total alone would pass
    assert latency["status"] == "hold"
    regressed = [s for s in latency["details"]["segments"] if s["regressed"]]
    assert [(s["key"], s["value"]) for s in regressed] == [("backend", "sglang")]
    assert "backend=sglang" in latency["next_action"]
    seg = report["segments"]["backend"]
    assert seg["sglang"]["latency_p95_ms"]["delta_pct"] > 20 > abs(seg["vllm"]["latency_p95_ms"]["delta_pct"])


def test_numeric_report_names_the_scope_that_applied():
    within = signal(gate("gate/numeric_within_scope.json", "gate-numeric.yaml"), "numeric-drift")
    scopes = {s["scope"]: s for s in within["details"]["scopes"]}
    # llama on a100 matches both a100 scopes: the two-key scope wins
    assert scopes["model=llama-3.1-8b,accelerator=a100"]["pairs"] == 60
    assert scopes["accelerator=a100"]["pairs"] == 60
    assert scopes["default"]["pairs"] == 120 and scopes["default"]["drifted"] == 0
    outside = signal(gate("gate/numeric_outside_scope.json", "gate-numeric.yaml"), "numeric-drift")
    assert outside["status"] == "rollback"
    assert outside["details"]["drifted"] == [{"request_id": "req-00000", "scope": "default"}]
    assert "default" in outside["message"]


def _regressed(n: int, factor: float, seed: int = 3) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """n pairs; the candidate's latency is the baseline's times ``factor`` and 3% paired noise."""
    rng = random.Random(seed)
    base, cand = [], []
    for i in range(n):
        lat = rng.lognormvariate(6.5, 0.6)
        common = {"request_id": f"r{i}", "model": "m", "accelerator": "h100", "output_fingerprint": f"f{i}"}
        base.append({**common, "latency_ms": round(lat, 3)})
        cand.append({**common, "latency_ms": round(lat * factor * (1 + rng.gauss(0, 0.03)), 3)})
    return base, cand


LATENCY_ONLY = "gate-latency-only.yaml"


@pytest.fixture
def latency_policy(tmp_path):
    path = tmp_path / LATENCY_ONLY
    path.write_text("version: 1\ngate:\n  seed: 1\n  signals:\n    - name: latency-p95\n"
                    "      options: {threshold: 0.10}\n    - name: matched-traffic\n", encoding="utf-8")
    return path


def _gate_policy(base, cand, policy_path):
    from tickgate.gate.pipeline import run_gate
    from tickgate.gate.config import load_gate_config
    from tickgate.gate.observations import side_from_document
    from tickgate.host.policy import load_policy

    return run_gate(side_from_document(doc(base), "baseline", "b"), side_from_document(doc(cand), "candidate", "c"),
                    load_gate_config(load_policy(policy_path)))


def test_true_20_percent_p95_regression_over_500_pairs_holds(latency_policy):
    base, cand = _regressed(600, 1.20)
    report = _gate_policy(base, cand, latency_policy)
    latency = signal(report, "latency-p95")
    assert report["decision"] == "hold" and latency["reason"] == "regression"
    assert 0.15 < latency["delta"] < 0.25
    assert latency["confidence_interval"][0] > 0  # significant as well as large


def test_same_data_without_the_regression_promotes(latency_policy):
    base, cand = _regressed(600, 1.0)
    report = _gate_policy(base, cand, latency_policy)
    assert report["decision"] == "promote"
    assert abs(signal(report, "latency-p95")["delta"]) < 0.03


def test_baseline_against_itself_promotes_with_zero_deltas():
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    report = gate_docs(bundle["baseline"], copy.deepcopy(bundle["baseline"]))
    assert report["decision"] == "promote"
    for s in report["signals"]:
        if s["delta"] is not None:
            assert s["delta"] == 0.0, s["id"]
        if s["confidence_interval"] is not None:
            assert s["confidence_interval"] == [0.0, 0.0], s["id"]


def _large_but_noisy() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """220 pairs whose candidate is 15 % slower, but with unpaired noise (sigma 1.2) on every
    request: past a 10 % threshold, and not significant."""
    rng = random.Random(9)
    base = [{"request_id": f"r{i}", "latency_ms": round(rng.lognormvariate(6, 1.2), 3)} for i in range(220)]
    cand = [dict(r, latency_ms=round(rng.lognormvariate(6, 1.2) * 1.15, 3)) for r in base]
    return base, cand


def test_large_but_noisy_difference_is_inconclusive_not_a_pass(latency_policy):
    base, cand = _large_but_noisy()
    report = _gate_policy(base, cand, latency_policy)
    latency = signal(report, "latency-p95")
    assert latency["status"] == "inconclusive" and latency["reason"] == "inconclusive"
    assert latency["confidence_interval"][0] <= 0 < latency["delta"] - latency["threshold"]
    assert report["decision"] == "inconclusive" and report["exit_code"] == 11


@pytest.mark.parametrize(("means", "decision", "code"), [("hold", "hold", 10), ("promote", "promote", 0)])
def test_the_policy_says_what_an_inconclusive_signal_makes_of_the_release(latency_policy, tmp_path, means,
                                                                          decision, code):
    base, cand = _large_but_noisy()
    policy = tmp_path / "p.yaml"
    policy.write_text(latency_policy.read_text().replace("gate:\n", f"gate:\n  inconclusive: {means}\n", 1))
    report = _gate_policy(base, cand, policy)
    assert signal(report, "latency-p95")["status"] == "inconclusive"
    assert (report["decision"], report["exit_code"]) == (decision, code)
    assert report["inputs"]["inconclusive"] == means


def test_dry_run_signal_is_reported_but_does_not_decide(tmp_path):
    policy = tmp_path / "dry.yaml"
    text = (POLICIES / "gate-default.yaml").read_text().replace(
        "    - name: latency-p95\n", "    - name: latency-p95\n      dry_run: true\n")
    policy.write_text(text)
    from tickgate.gate.pipeline import gate_files

    report = gate_files(policy, bundle=FIXTURES / "gate/p95_regression.json")
    assert report["decision"] == "promote"
    assert report["triage"] == [dict(report["triage"][0], signal="latency-p95", status="hold", dry_run=True)]
    assert signal(report, "latency-p95")["dry_run"] is True


def test_report_does_not_depend_on_request_order():
    bundle = json.loads((FIXTURES / "gate/p95_regression.json").read_text())
    shuffled = copy.deepcopy(bundle["candidate"])
    random.Random(5).shuffle(shuffled["requests"])
    a = gate_docs(bundle["baseline"], bundle["candidate"])
    b = gate_docs(bundle["baseline"], shuffled)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_aggregate_only_says_no_join_and_never_promotes_on_the_default_policy():
    report = gate("gate/aggregate_only_default.json")
    assert report["decision"] == "hold"
    assert report["join"]["per_request"] is False
    assert any("no per-request join was possible" in t["message"] for t in report["triage"])
    assert "no per-request join was possible" in report["notes"][0]


def test_unmatched_requests_are_counted_and_listed():
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    cand = copy.deepcopy(bundle["candidate"])
    del cand["requests"][5]
    cand["requests"].append(dict(cand["requests"][0], request_id="extra-1"))
    report = gate_docs(bundle["baseline"], cand)
    assert report["join"]["matched"] == 239
    assert report["join"]["baseline_only"] == {"count": 1, "ids": ["req-00005"]}
    assert report["join"]["candidate_only"] == {"count": 1, "ids": ["extra-1"]}


# -- the command line ---------------------------------------------------------------------

def test_cli_exit_codes_and_triage_lines(tmp_path):
    env = {"TICKGATE_PLUGINS": "tickgate"}
    out = tmp_path / "r.json"
    safe = run_cli("gate", "--input", str(FIXTURES / "release_gate_safe.json"), "--output", str(out), env=env)
    assert safe.returncode == 0, safe.stderr
    assert json.loads(out.read_text())["decision"] == "promote"
    bad = run_cli("gate", "--input", str(FIXTURES / "release_gate_bad.json"), "--output", str(out),
                  "--policy", str(POLICIES / "gate-default.yaml"), env=env)
    assert bad.returncode == 20
    assert "rollback error-rate" in bad.stdout and "rollback output-mismatch" in bad.stdout
    hold = run_cli("gate", "--input", str(FIXTURES / "gate/ttft_regression.json"), "--output", str(out), "--quiet",
                   env=env)
    assert hold.returncode == 10 and hold.stdout == ""


def test_cli_invalid_input_is_one_line_exit_2_and_writes_nothing(tmp_path):
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    bundle["candidate"]["requests"][3]["latency_ms"] = "fast"
    bad = tmp_path / "bundle.json"
    bad.write_text(generate_text(bundle))
    out = tmp_path / "r.json"
    res = run_cli("gate", "--input", str(bad), "--output", str(out), env={"TICKGATE_PLUGINS": "tickgate"})
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    line = res.stderr.strip()
    assert f"{bad}:" in line and "$.candidate.requests[3].latency_ms" in line and "'fast'" in line
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


def generate_text(bundle: dict[str, Any]) -> str:
    return json.dumps(bundle, indent=1)


def test_cli_report_is_byte_identical_across_runs_and_hash_seeds(tmp_path):
    outputs = []
    for seed in ("0", "1", "12345"):
        out = tmp_path / f"r{seed}.json"
        res = run_cli("gate", "--input", str(FIXTURES / "gate/segment_regression.json"), "--output", str(out),
                      "--quiet", env={"PYTHONHASHSEED": seed, "TICKGATE_PLUGINS": "tickgate"})
        assert res.returncode == 10, res.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


def test_cli_gates_two_neutral_files(tmp_path):
    bundle = json.loads((FIXTURES / "gate/memory_regression.json").read_text())
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    base.write_text(json.dumps(bundle["baseline"]))
    cand.write_text(json.dumps(bundle["candidate"]))
    out = tmp_path / "r.json"
    res = run_cli("gate", "--baseline", str(base), "--candidate", str(cand), "--output", str(out),
                  env={"TICKGATE_PLUGINS": "tickgate"})
    assert res.returncode == 10, res.stderr
    report = json.loads(out.read_text())
    assert [t["signal"] for t in report["triage"]] == ["memory-pressure"]
    assert report["inputs"]["candidate"]["file"] == str(cand)
    memory = signal(report, "memory-pressure")
    assert memory["unit"] == "absolute" and 0.13 < memory["delta"] < 0.17


@pytest.mark.parametrize("args,message", [
    (["--input", "x.json", "--baseline", "b.json"], "give either --input or --baseline and --candidate"),
    (["--baseline", "b.json"], "give --input BUNDLE, or both --baseline and --candidate"),
    (["--input", "missing.json"], "missing.json: file not found"),
])
def test_cli_usage_errors_exit_2(tmp_path, args, message):
    res = run_cli("gate", *args, "--output", str(tmp_path / "r.json"), env={"TICKGATE_PLUGINS": "tickgate"},
                  cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr and res.stderr.count("\n") == 1


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(240, 320), streaming=st.booleans())
def test_any_sufficient_run_compared_with_itself_promotes(seed, n, streaming):
    reqs = generate.baseline(n, seed=seed, streaming=streaming)
    for i, r in enumerate(reqs[::17]):
        r["error"] = f"timeout {i}"  # errors on both sides are not an increase
    base = doc(reqs)
    report = gate_docs(base, copy.deepcopy(base), "gate-streaming.yaml" if streaming else "gate-default.yaml")
    if streaming:  # every route, scheduler and stream is present in generated traffic
        assert signal(report, "route-evidence")["status"] == "pass"
    assert report["decision"] == "promote", report["triage"]
    assert all(s["delta"] in (None, 0.0) for s in report["signals"])


def test_the_bundled_policy_is_named_the_same_on_every_install(tmp_path) -> None:
    from conftest import run_cli

    res = run_cli("gate", "--input", str(FIXTURES / "release_gate_safe.json"), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 0
    assert json.loads((tmp_path / "r.json").read_text())["inputs"]["policy"] == "bundled:gate-default.yaml"
