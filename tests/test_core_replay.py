"""The foundation's promises: the reference report, determinism, fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES, POLICIES, REPO, run_cli

REFERENCE = {
    "request_count": 4,
    "completed_requests": 4,
    "total_prompt_tokens": 224,
    "total_decode_tokens": 18,
    "total_reserved_kv_pages": 18,
    "total_ticks": 11,
    "peak_kv_pages": 12,
    "peak_kv_pressure_pct": 60.0,
    "decode_capacity_utilization": 0.818182,
    "final_kv_pages": 0,
}


def _replay(tmp_path: Path, workload: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    out = tmp_path / "report.json"
    res = run_cli("replay", "--input", str(workload), "--output", str(out), *extra, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def test_reference_report_matches_the_seed(tmp_path: Path) -> None:
    report = _replay(tmp_path, FIXTURES / "workload.json")
    summary = report["summary"]
    assert list(summary) == [*REFERENCE, "trace_fingerprint"]  # summary first, exact fields, in order
    assert {k: summary[k] for k in REFERENCE} == REFERENCE
    fp = summary["trace_fingerprint"]
    assert len(fp) == 16 and all(c in "0123456789abcdef" for c in fp)
    assert list(report)[0] == "summary"
    assert len(report["ticks"]) == 11
    assert [o["status"] for o in report["outcomes"]] == ["completed"] * 4


def test_default_policy_is_used_without_policy_flag(tmp_path: Path) -> None:
    implicit = _replay(tmp_path, FIXTURES / "workload.json")
    explicit = _replay(tmp_path, FIXTURES / "workload.json", "--policy", str(POLICIES / "default.yaml"))
    assert implicit["summary"] == explicit["summary"]


def test_report_bytes_identical_across_hash_seeds_and_cwd(tmp_path: Path) -> None:
    outputs = []
    for seed, cwd in (("0", REPO), ("1", tmp_path), ("12345", REPO / "fixtures")):
        out = tmp_path / f"r{seed}.json"
        res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(out),
                      "--policy", str(POLICIES / "default.yaml"),
                      env={"PYTHONHASHSEED": seed}, cwd=cwd)
        assert res.returncode == 0, res.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


def test_fingerprint_changes_with_any_scheduling_decision(tmp_path: Path) -> None:
    base = json.loads((FIXTURES / "workload.json").read_text())
    reference = _replay(tmp_path, FIXTURES / "workload.json")["summary"]["trace_fingerprint"]

    # Same totals, different decision: swap the priorities of two requests.
    swapped = json.loads(json.dumps(base))
    swapped["requests"][0]["priority"], swapped["requests"][1]["priority"] = 1, 0
    path = tmp_path / "swapped.json"
    path.write_text(json.dumps(swapped))
    other = _replay(tmp_path, path)["summary"]
    assert other["total_decode_tokens"] == 18
    assert other["trace_fingerprint"] != reference

    # Same workload, a policy that decodes differently.
    policy = (POLICIES / "default.yaml").read_text().replace("decode_batch_width: 2", "decode_batch_width: 3")
    ppath = tmp_path / "wide.yaml"
    ppath.write_text(policy)
    wide = _replay(tmp_path, FIXTURES / "workload.json", "--policy", str(ppath))["summary"]
    assert wide["trace_fingerprint"] != reference

    # Key order and layout of the input file do not matter.
    reordered = {"requests": [dict(reversed(list(r.items()))) for r in base["requests"]],
                 "description": base["description"], "version": 1}
    rpath = tmp_path / "reordered.json"
    rpath.write_text(json.dumps(reordered, indent=4))
    assert _replay(tmp_path, rpath)["summary"]["trace_fingerprint"] == reference


def test_trace_file_has_every_tick_and_matches_report(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    report = _replay(tmp_path, FIXTURES / "workload.json", "--trace", str(trace))
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert lines == report["ticks"]
    assert sum(r["decode_tokens"] * r["span"] for r in lines) == 18
    assert [r["tick"] for r in lines] == list(range(11))


def test_rejected_request_is_reported_with_reason(tmp_path: Path) -> None:
    workload = {"version": 1, "requests": [
        {"id": "ok", "prompt_tokens": 16, "max_output_tokens": 2},
        {"id": "huge", "prompt_tokens": 4000, "max_output_tokens": 10},
    ]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    report = _replay(tmp_path, path)
    assert report["summary"]["completed_requests"] == 1
    rejected = [o for o in report["outcomes"] if o["status"] == "rejected"]
    assert rejected == [{"id": "huge", "status": "rejected",
                         "reason": "needs 251 KV pages; the cache has 20", "arrival_tick": 0,
                         "finished_tick": 0, "prompt_tokens": 4000}]
    assert report["requests"]["rejections_by_reason"] == {"needs more KV pages than the cache has": 1}


def test_rejections_group_by_reason_and_keep_the_numbers_as_figures(tmp_path: Path) -> None:
    """One key per reason, not per request (a Mooncake trace gave one key per request):
    the numbers each request's reason quotes become ranges, the first text an example."""
    sizes = [4000, 1000, 9000, 1000]
    workload = {"version": 1, "requests": [
        {"id": "ok", "prompt_tokens": 16, "max_output_tokens": 2, "tenant": "a"},
        *({"id": f"huge{i}", "prompt_tokens": n, "max_output_tokens": 10, "tenant": "a"}
          for i, n in enumerate(sizes)),
    ]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    report = _replay(tmp_path, path)
    key = "needs more KV pages than the cache has"
    requests = report["requests"]
    assert requests["rejections_by_reason"] == {key: 4}
    assert requests["rejection_figures"] == {key: {
        "example": "needs 251 KV pages; the cache has 20",
        "cache_pages": {"min": 20, "max": 20}, "needed_pages": {"min": 64, "max": 564}}}
    assert list(requests) == ["completed", "rejected", "rejections_by_reason", "rejection_figures",
                              "preemptions", "queue_ticks"]
    assert report["segments"]["tenant"]["a"]["rejections_by_reason"] == {key: 4}
    # each outcome still says its own numbers
    assert [o["reason"] for o in report["outcomes"] if o["status"] == "rejected"] == [
        f"needs {-(-(n + 10) // 16)} KV pages; the cache has 20" for n in sizes]
    # the same with the summary in the sidecar (the key and figures cross the pipe)
    sidecar = _replay(tmp_path, path, env={"TICKGATE_PARALLEL": "1"})
    assert sidecar == report


def test_idle_gaps_are_skipped_but_counted(tmp_path: Path) -> None:
    workload = {"version": 1, "requests": [
        {"id": "a", "prompt_tokens": 16, "max_output_tokens": 1, "arrival_tick": 0},
        {"id": "b", "prompt_tokens": 16, "max_output_tokens": 1, "arrival_tick": 1000},
    ]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    report = _replay(tmp_path, path)
    assert report["summary"]["total_ticks"] == 1002
    assert report["utilization"]["busy_ticks"] == 4
    assert [t["tick"] for t in report["ticks"]] == [0, 1, 1000, 1001]


def test_timing_section_adds_latency_percentiles(tmp_path: Path) -> None:
    policy = (POLICIES / "default.yaml").read_text() + (
        "timing:\n  fixed_ms: 5\n  per_prefill_token_ms: 0.1\n  per_decode_seq_ms: 1\n  per_context_token_ms: 0.01\n")
    ppath = tmp_path / "timed.yaml"
    ppath.write_text(policy)
    report = _replay(tmp_path, FIXTURES / "workload.json", "--policy", str(ppath))
    latency = report["latency"]
    assert latency["ttft_ms"]["count"] == 4
    assert latency["e2e_ms"]["p99"] >= latency["e2e_ms"]["p50"] > 0
    busy = sum(t["duration_ms"] for t in report["ticks"])
    assert abs(latency["busy_ms"] - busy) < 1e-6
    # The timing model never changes decisions.
    assert report["summary"]["trace_fingerprint"] == _replay(
        tmp_path, FIXTURES / "workload.json")["summary"]["trace_fingerprint"]


def test_arrivals_in_ms_need_a_timing_model(tmp_path: Path) -> None:
    workload = {"version": 1, "requests": [
        {"id": "a", "prompt_tokens": 16, "max_output_tokens": 3, "arrival_ms": 0},
        {"id": "b", "prompt_tokens": 16, "max_output_tokens": 3, "arrival_ms": 12.5},
    ]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(path), "--output", str(out))
    assert res.returncode == 2
    assert "timing" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()

    ppath = tmp_path / "timed.yaml"
    ppath.write_text((POLICIES / "default.yaml").read_text() + "timing:\n  fixed_ms: 10\n")
    report = _replay(tmp_path, path, "--policy", str(ppath))
    by_id = {o["id"]: o for o in report["outcomes"]}
    # steps take 10 ms: b (12.5 ms) joins before step 2, which starts at 20 ms
    assert by_id["b"]["arrival_tick"] == 2
    assert by_id["a"]["first_token_ms"] == 20.0  # prefill step 0, first decode step 1 ends at 20 ms


def test_python_api_and_cli_agree(tmp_path: Path) -> None:
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay
    from tickgate.workload.format import read_workload

    api = replay(read_workload(FIXTURES / "workload.json").requests, load_policy(POLICIES / "default.yaml"))
    cli_report = _replay(tmp_path, FIXTURES / "workload.json")
    assert api["summary"] == cli_report["summary"]
    # the bundled policy (no --policy) is named the same on every machine and install
    assert cli_report["inputs"]["policy"] == "bundled:default.yaml"


def test_a_copy_of_a_bundled_policy_is_named_by_its_path(tmp_path: Path) -> None:
    from tickgate.host.policy import load_policy

    copy = tmp_path / "default.yaml"
    copy.write_text((POLICIES / "default.yaml").read_text())
    assert load_policy(copy).source == str(copy)
    assert load_policy(None).source == "bundled:default.yaml"
    from tickgate.util.schemas import data_file

    assert load_policy(data_file("policies", "default.yaml")).source == "bundled:default.yaml"


def test_outcomes_read_back_into_values(tmp_path: Path) -> None:
    from tickgate.replay.serialize import outcome_from_json, outcome_to_json

    policy = (POLICIES / "default.yaml").read_text() + "timing:\n  fixed_ms: 3.3333\n"
    ppath = tmp_path / "timed.yaml"
    ppath.write_text(policy)
    report = _replay(tmp_path, FIXTURES / "workload.json", "--policy", str(ppath))
    for entry in report["outcomes"]:
        outcome = outcome_from_json(entry)
        assert outcome.status == "completed" and outcome.output_tokens > 0
        assert outcome_to_json(outcome) == entry
        assert entry["finished_ms"] == round(entry["finished_ms"], 3)


def test_a_timed_workload_under_an_untimed_preset_says_what_to_add(tmp_path: Path) -> None:
    """The seed presets have no timing section; an imported trace (arrivals in ms) needs
    one. The error gives a snippet that, added to a copy of the preset, makes it replay."""
    from tickgate.replay.run import TIMING_EXAMPLE

    workload = tmp_path / "w.json"
    res = run_cli("import", "splitwise", str(FIXTURES / "realdata" / "traces" / "splitwise_sim_test_trace.csv"),
                  "--output", str(workload), "--quiet")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(workload), "--output", str(out))
    assert res.returncode == 2 and not out.exists()
    [line] = res.stderr.splitlines()
    from tickgate.util.schemas import data_file

    # the bundled policy's path: the repository's policies/ in an editable install, site-packages otherwise
    assert line == (f"error: {data_file('policies', 'default.yaml')}: $.timing: the workload gives arrivals in ms "
                    "(arrival_ms); the policy needs a 'timing' section to map them onto steps: add one to a "
                    "copy of this bundled policy, e.g. `timing: {name: linear, options: {fixed_ms: 4.0, "
                    "per_prefill_token_ms: 0.02, per_decode_seq_ms: 0.15, per_context_token_ms: 0.0002}}` "
                    "(docs/timing.md)")
    copy = tmp_path / "timed.yaml"
    copy.write_text((POLICIES / "default.yaml").read_text() + TIMING_EXAMPLE + "\n")
    res = run_cli("replay", "--input", str(workload), "--policy", str(copy), "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["inputs"]["timing"]["options"]["per_decode_seq_ms"] == 0.15
