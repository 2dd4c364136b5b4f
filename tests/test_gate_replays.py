"""Gating one replay against another (a scheduling change before it ships), and the
throughput, goodput and prefix-cache signals, each shown holding on a real regression
and passing without one."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES, TOYS, run_cli
from tickgate.gate.pipeline import gate_files

DEFAULT = POLICIES / "gate-default.yaml"
CLIENTS = FIXTURES / "realdata" / "clients"


def _workload(path: Path, n: int = 400, seed: int = 7, spacing_ms: float = 20.0) -> Path:
    """A pressured open-loop workload: requests every ``spacing_ms`` with prompts of 200-1200
    tokens and 50-200 output tokens (more than 8 sequences are in flight at once)."""
    rng = random.Random(seed)
    reqs = [{"id": f"r{i:04d}", "prompt_tokens": rng.randint(200, 1200), "max_output_tokens": rng.randint(50, 200),
             "priority": 0, "arrival_ms": round(i * spacing_ms, 3)} for i in range(n)]
    path.write_text(json.dumps({"version": 1, "description": "pressured", "requests": reqs}))
    return path


def _policy(tmp_path: Path, name: str, **changes: str) -> Path:
    text = (TOYS / "vllm-v1-toy.yaml").read_text()
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def _replay(tmp_path: Path, workload: Path, policy: Path, name: str) -> Path:
    out = tmp_path / name
    result = run_cli("replay", "--input", str(workload), "--policy", str(policy), "--output", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def replays(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("replays")
    work = _workload(tmp / "w.json")
    base = _policy(tmp, "base.yaml")
    seqs8 = _policy(tmp, "seqs8.yaml", **{"max_num_seqs: 64": "max_num_seqs: 8"})
    return {"base": _replay(tmp, work, base, "base.json"), "seqs8": _replay(tmp, work, seqs8, "seqs8.json")}


def _signal(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["signals"] if s["signal"] == name)


def test_a_replay_report_gated_against_itself_promotes(replays):
    report = gate_files(DEFAULT, baseline=replays["base"], candidate=replays["base"])
    assert report["inputs"]["baseline"]["format"] == "tickgate-replay"
    assert report["join"]["matched"] == 400
    assert report["decision"] == "promote", report["triage"]
    prov = report["inputs"]["baseline"]["provenance"]
    assert prov["trace_fingerprint"] == json.loads(replays["base"].read_text())["summary"]["trace_fingerprint"]
    assert _signal(report, "output-mismatch")["status"] == "pass"


def test_fewer_sequences_on_a_pressured_workload_holds_naming_latency(replays, tmp_path):
    out = tmp_path / "gate.json"
    result = run_cli("gate", "--baseline", str(replays["base"]), "--candidate", str(replays["seqs8"]),
                     "--output", str(out))
    assert result.returncode == 10, result.stderr
    report = json.loads(out.read_text())
    holding = {t["signal"] for t in report["triage"]}
    assert holding & {"latency-p95", "ttft-p95"}
    assert _signal(report, "ttft-p95")["reason"] == "regression"
    assert "ttft-p95" in result.stdout.splitlines()[0] or "latency-p95" in result.stdout.splitlines()[0]


def test_a_report_with_cut_outcomes_says_how_to_replay(tmp_path):
    work = _workload(tmp_path / "w.json", n=30)
    out = tmp_path / "r.json"
    assert run_cli("replay", "--input", str(work), "--policy", str(TOYS / "vllm-v1-toy.yaml"),
                   "--output", str(out), "--detail-limit", "10", "--quiet").returncode == 0
    result = run_cli("gate", "--baseline", str(out), "--candidate", str(out), "--output", str(tmp_path / "g.json"))
    assert result.returncode == 2
    assert "lists 10 of 30 request outcomes" in result.stderr and "--detail-limit 30" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "g.json").exists()


def test_an_untimed_replay_leaves_latency_not_evaluated(tmp_path):
    work = _workload(tmp_path / "w.json", n=60)
    doc = json.loads(work.read_text())
    for i, r in enumerate(doc["requests"]):
        del r["arrival_ms"]
        r["arrival_tick"] = i
    work.write_text(json.dumps(doc))
    text = (TOYS / "vllm-v1-toy.yaml").read_text()
    untimed = tmp_path / "untimed.yaml"
    untimed.write_text(text[:text.index("timing:")])
    out = _replay(tmp_path, work, untimed, "r.json")
    report = gate_files(DEFAULT, baseline=out, candidate=out)
    assert _signal(report, "latency-p95")["status"] == "not_evaluated"
    notes = report["inputs"]["baseline"]["provenance"]["notes"]
    assert any("untimed replay" in n for n in notes)


# -- throughput -------------------------------------------------------------------------------------
def _offline(tmp_path: Path, policy: Path, name: str) -> Path:
    """An offline batch (every request at 0 ms): its makespan is the engine's throughput."""
    work = _workload(tmp_path / "offline.json", n=300, spacing_ms=0.0)
    return _replay(tmp_path, work, policy, name)


def test_throughput_holds_when_an_offline_batch_takes_longer(tmp_path):
    base = _offline(tmp_path, _policy(tmp_path, "b.yaml"), "b.json")
    slow = _offline(tmp_path, _policy(tmp_path, "s.yaml", **{"fixed_ms: 6.0": "fixed_ms: 9.0"}), "s.json")
    report = gate_files(DEFAULT, baseline=base, candidate=slow)
    signal = _signal(report, "throughput")
    assert signal["status"] == "hold" and signal["reason"] == "regression", signal
    assert signal["details"]["source"] == "per-request send times and latencies"
    assert signal["delta"] < -0.10
    same = gate_files(DEFAULT, baseline=base, candidate=base)
    assert _signal(same, "throughput")["status"] == "pass"


def test_throughput_from_run_aggregates_when_requests_have_no_send_times(tmp_path):
    """sglang.bench_serving writes no per-request start times: its request_throughput decides."""
    src = CLIENTS / "sglang_bench_serving_0.5.23" / "sglang_vllm_baseline.jsonl"
    obj = json.loads(src.read_text().splitlines()[-1])
    obj["output_throughput"] *= 0.8
    obj["request_throughput"] *= 0.8
    worse = tmp_path / "worse.jsonl"
    worse.write_text(json.dumps(obj) + "\n")
    report = gate_files(DEFAULT, baseline=src, candidate=worse)
    signal = _signal(report, "throughput")
    assert signal["status"] == "hold" and signal["details"]["source"] == "the run aggregates"
    assert _signal(gate_files(DEFAULT, baseline=src, candidate=src), "throughput")["status"] == "pass"


def test_throughput_per_segment(tmp_path):
    """One tenant's traffic served slower while the total stays within the threshold."""
    def row(i: int, tenant: str, start: float) -> dict[str, Any]:
        return {"request_id": f"{tenant}{i:04d}", "start_ms": start, "latency_ms": 100.0, "ttft_ms": 10.0,
                "tokens_out": 50, "error": None, "segments": {"tenant": tenant}}

    # tenant a: 500 requests over 5 s; tenant b: 100 requests in the first second
    rows = [row(i, "a", i * 10.0) for i in range(500)] + [row(i, "b", i * 10.0) for i in range(100)]
    base = {"version": 1, "kind": "tickgate.observations", "run": {"backend": "x"}, "requests": rows}
    cand = json.loads(json.dumps(base))
    for r in cand["requests"]:
        if r["segments"]["tenant"] == "b":
            r["start_ms"] = r["start_ms"] * 2  # b's requests now take two seconds to get through
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(base))
    b.write_text(json.dumps(cand))
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ngate:\n  signals:\n    - name: throughput\n      options: {segment_keys: [tenant]}\n")
    signal = gate_files(policy, baseline=a, candidate=b)["signals"][0]
    assert signal["status"] == "hold" and "tenant=b" in signal["message"]
    assert signal["delta"] > -0.10  # the total did not drop past the threshold


def _timed_rows(n: int, latency_ms: float, tokens_out: int) -> dict[str, Any]:
    rows = [{"request_id": f"q{i:04d}", "start_ms": i * 10.0, "latency_ms": latency_ms, "ttft_ms": 10.0,
             "tokens_out": tokens_out, "error": None} for i in range(n)]
    return {"version": 1, "kind": "tickgate.observations", "run": {"backend": "x"}, "requests": rows}


def _throughput(tmp_path: Path, base: dict[str, Any], cand: dict[str, Any]) -> dict[str, Any]:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(base))
    b.write_text(json.dumps(cand))
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ngate:\n  signals:\n    - name: throughput\n")
    return gate_files(policy, baseline=a, candidate=b)["signals"][0]


def test_throughput_shows_first_the_requests_per_s_it_compares(tmp_path):
    """The same 300 requests at 25 % fewer requests/s: the message leads with requests/s, and its
    baseline, candidate and delta are requests/s (output tokens/s follows, in brackets)."""
    # the window: 2990 ms of sends + the last latency (100 ms, then 1130 ms)
    signal = _throughput(tmp_path, _timed_rows(300, 100.0, 50), _timed_rows(300, 1130.0, 50))
    assert signal["status"] == "hold" and signal["reason"] == "regression", signal
    assert signal["details"]["metric"] == "requests_per_s"
    assert signal["message"].startswith("requests/s 97.087 -> 72.816 ")
    assert "[output tokens/s 4854.369 -> 3640.777 " in signal["message"]
    assert ": requests/s dropped past" in signal["message"]
    req = signal["details"]["metrics"]["requests_per_s"]
    assert (signal["baseline"], signal["candidate"]) == (req["baseline"], req["candidate"])
    assert signal["delta"] == pytest.approx(-req["drop"])


def test_shorter_outputs_are_no_throughput_drop(tmp_path):
    """Half the output tokens in the same time: output tokens/s halves, requests/s does not;
    the outputs changed (output-mismatch's to judge), not the speed."""
    signal = _throughput(tmp_path, _timed_rows(300, 100.0, 50), _timed_rows(300, 100.0, 25))
    assert signal["status"] == "pass", signal
    assert signal["delta"] == 0.0
    assert signal["details"]["metrics"]["output_tokens_per_s"]["drop"] == pytest.approx(0.5)


def test_throughput_falls_back_to_output_tokens_per_s_and_names_it(tmp_path):
    """A run that reports no requests/s is compared on output tokens/s, and says so."""
    def run(tokens_per_s: float) -> dict[str, Any]:
        return {"version": 1, "kind": "tickgate.observations",
                "run": {"aggregates": {"request_count": 300, "completed": 300, "output_throughput": tokens_per_s}}}

    signal = _throughput(tmp_path, run(1000.0), run(800.0))
    assert signal["status"] == "hold" and signal["details"]["metric"] == "output_tokens_per_s", signal
    assert signal["message"].startswith("output tokens/s 1000.000 -> 800.000 ")
    assert (signal["baseline"], signal["candidate"]) == (1000.0, 800.0)


# -- goodput ----------------------------------------------------------------------------------------
def _goodput_policy(tmp_path: Path, slo: str) -> Path:
    path = tmp_path / "goodput.yaml"
    path.write_text(f"version: 1\ngate:\n  signals:\n    - name: goodput\n      options: {{slo: {slo}}}\n")
    return path


def test_goodput_holds_when_fewer_requests_meet_the_itl_slo(tmp_path):
    """The real 20 %-slower candidate: a 17 ms mean inter-token SLO most baseline requests meet
    (15 ms server ITL) and few candidate requests do (18 ms)."""
    base = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
    slow = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_candidate_slow.json"
    policy = _goodput_policy(tmp_path, "{ttft_ms: 2000, itl_ms: 17}")
    held = gate_files(policy, baseline=base, candidate=slow)["signals"][0]
    same = gate_files(policy, baseline=base, candidate=base)["signals"][0]
    assert held["status"] == "hold" and held["reason"] == "regression", held
    assert held["baseline"] > 0.8 and held["candidate"] < 0.2
    assert held["confidence_interval"][1] < 0
    assert same["status"] == "pass" and same["delta"] == 0


def test_goodput_counts_failed_requests_as_missing_their_slo(tmp_path):
    rows = [{"request_id": f"q{i:04d}", "ttft_ms": 100.0, "latency_ms": 500.0, "tokens_out": 41, "error": None}
            for i in range(300)]
    base = {"version": 1, "kind": "tickgate.observations", "run": {}, "requests": rows}
    cand = json.loads(json.dumps(base))
    for r in cand["requests"][::5]:
        r["error"] = "HTTP 500"
        del r["ttft_ms"], r["latency_ms"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(base))
    b.write_text(json.dumps(cand))
    signal = gate_files(_goodput_policy(tmp_path, "{ttft_ms: 200, itl_ms: 20}"), baseline=a, candidate=b)["signals"][0]
    assert signal["status"] == "hold" and signal["candidate"] == pytest.approx(0.8)


def test_goodput_without_the_figures_on_either_side_is_not_evaluated(tmp_path):
    rows = [{"request_id": f"q{i:04d}", "error": None, "output_fingerprint": "x"} for i in range(300)]
    doc = {"version": 1, "kind": "tickgate.observations", "run": {}, "requests": rows}
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    signal = gate_files(_goodput_policy(tmp_path, "{ttft_ms: 200}"), baseline=a, candidate=a)["signals"][0]
    assert signal["status"] == "not_evaluated"


# -- prefix cache -----------------------------------------------------------------------------------
def test_prefix_cache_hit_rate_drop_holds(tmp_path):
    """The Mooncake conversation trace shares prefixes: turning prefix caching off loses its hits."""
    trace = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
    work = tmp_path / "mooncake.json"
    assert run_cli("import", "mooncake", str(trace), "--block-size", "512", "--limit", "1500",
                   "--output", str(work)).returncode == 0
    on = _replay(tmp_path, work, _policy(tmp_path, "on.yaml"), "on.json")
    off = _replay(tmp_path, work, _policy(tmp_path, "off.yaml", **{"enable_prefix_caching: true":
                                                                   "enable_prefix_caching: false"}), "off.json")
    report = gate_files(DEFAULT, baseline=on, candidate=off)
    signal = _signal(report, "prefix-cache-hit-rate")
    assert signal["status"] == "hold" and signal["reason"] == "regression", signal
    assert signal["baseline"] > 0.05 and signal["candidate"] == 0.0
    assert _signal(gate_files(DEFAULT, baseline=on, candidate=on), "prefix-cache-hit-rate")["status"] == "pass"


def test_prefix_cache_hit_rate_on_one_side_only_holds(tmp_path):
    doc = {"version": 1, "kind": "tickgate.observations", "run": {"aggregates": {"prefix_cache_hit_rate": 0.4}}}
    bare = {"version": 1, "kind": "tickgate.observations", "run": {"aggregates": {}}}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc))
    b.write_text(json.dumps(bare))
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ngate:\n  signals:\n    - name: prefix-cache-hit-rate\n")
    assert gate_files(policy, baseline=a, candidate=b)["signals"][0]["reason"] == "missing_evidence"
    assert gate_files(policy, baseline=b, candidate=b)["signals"][0]["status"] == "not_evaluated"
