"""CPU KV offload in the vllm-v1 mirror (v1.offload, v1.cpu_tier, v1.offload_step): the report
against the harness's own counters for every recorded offload case, the README's probe scenarios,
the CPU tier's LRU, timing by host bandwidth, option errors and determinism. Step-by-step
conformance is test_vllm_conformance.py (the offload-* cases of fixtures/vllm-reference/cases.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickgate import Request
from tickgate.util.errors import InputError
from tickgate_vllm.conformance import (compare, load_reference_workload, read_steps, run_mirror, run_mirror_paths,
                                      scheduler_options)
from tickgate_vllm.v1.cpu_tier import HIT, MISS, PENDING, CpuTier, TierRequest
from vllm_helpers import mirror_run, mirror_run_outcomes, replay_reports_across_hash_seeds

REPO = Path(__file__).resolve().parents[3]
REF = REPO / "fixtures" / "vllm-reference"
OFFLOAD_CASES = [c["name"] for c in json.loads((REF / "cases.json").read_text())
                 if c["name"].startswith("offload-")]


@pytest.mark.parametrize("name", OFFLOAD_CASES)
def test_report_counts_agree_with_vllm(name: str) -> None:
    requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
    summary, _, _ = mirror_run(requests, scheduler_options(config))
    theirs = json.loads((REF / f"{name}.summary.json").read_text())
    s = summary["kv_offload"]
    tot = theirs["totals"]
    assert (s["load_jobs"], s["loaded_chunks"], s["loaded_tokens"]) == (
        tot["kv_load_jobs"], tot["kv_load_blocks"], tot["kv_external_tokens"])
    assert (s["store_jobs"], s["stored_chunks"]) == (tot["kv_store_jobs"], tot["kv_store_blocks"])
    facts = theirs["kv_offload"]
    assert (s["cpu_chunks"], s["blocks_per_chunk"]) == (facts["num_cpu_chunks"], facts["blocks_per_chunk"])
    # hits by tier at first admissions: GPU + CPU never exceed the prompts
    assert 0 <= s["hit_rate_by_tier"]["gpu"] + s["hit_rate_by_tier"]["cpu"] <= 1
    assert summary["preemptions"] == tot["preemptions"]


def test_offload_cases_cover_tiers_spec_loads_and_pressure() -> None:
    configs = {n: json.loads((REF / f"{n}.workload.json").read_text())["config"] for n in OFFLOAD_CASES}
    summaries = {n: json.loads((REF / f"{n}.summary.json").read_text()) for n in OFFLOAD_CASES}
    for spec in (False, True):  # small and large CPU tiers, each with and without speculative decoding
        sizes = {c["kv_offload_cpu_blocks"] for c in configs.values() if (c.get("num_speculative_tokens", 0) > 0) == spec}
        assert min(sizes) <= 64 and max(sizes) >= 2048, spec
        assert any(summaries[n]["totals"]["kv_load_jobs"] > 0 for n, c in configs.items()
                   if (c.get("num_speculative_tokens", 0) > 0) == spec)
    assert {c.get("spec_method") for c in configs.values() if c.get("num_speculative_tokens")} == {
        "ngram", "eagle", "draft_model"}
    assert {c.get("enable_prefix_caching", False) for c in configs.values()} == {True, False}
    assert any(c.get("kv_offload_load_steps", 0) > 0 for c in configs.values())
    assert any((c.get("kv_offload_extra_config") or {}).get("blocks_per_chunk", 1) > 1 for c in configs.values())
    assert sum(s["totals"]["kv_load_jobs"] for s in summaries.values()) >= 100
    flushing = [n for n in OFFLOAD_CASES if any(json.loads(line)["kv_flush"] for line in
                                                (REF / f"{n}.steps.jsonl").read_text().splitlines())]
    assert len(flushing) >= 3  # preempted requests' jobs, finished requests' fenced stores
    assert max(s["totals"]["preemptions"] for s in summaries.values()) >= 20
    assert all(s["vllm_version"] == "0.33.0" and not s["deadlock"] for s in summaries.values())


def test_finished_requests_follow_vllms_set_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM walks finished_req_ids, a set, to store and rank finished requests' chunks: in
    insertion order the recordings diverge; the mirror reproduces CPython's set order."""
    from tickgate_vllm.v1 import offload as v1_offload

    name = "offload-small-tier"
    requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
    reference = list(read_steps(REF / f"{name}.steps.jsonl"))
    assert compare(reference, run_mirror(requests, config))["first_divergence"] is None
    monkeypatch.setattr(v1_offload, "set_order", list)
    assert compare(reference, run_mirror(requests, config))["first_divergence"] is not None


def test_gpu_block_ids_are_vllms_without_prefix_caching() -> None:
    """Without prefix caching the scheduler keeps vLLM's free queue of block ids (the fences
    of finished requests' stores need them): every load and store names vLLM's own blocks."""
    for name in ("offload-no-prefix-preempt", "offload-spec-nocache-preempt"):
        requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
        reference = list(read_steps(REF / f"{name}.steps.jsonl"))
        mirror = run_mirror(requests, config)
        assert [(x["kv_load"], x["kv_store"]) for x in mirror] == [(x["kv_load"], x["kv_store"]) for x in reference]
        assert sum(len(x["kv_load"]) for x in reference) >= 20


def test_quiescent_offload_runs_the_fast_paths_and_matches() -> None:
    """While the connector has nothing to do and nothing waits, offload replays take the
    spans and the finishing step; the recordings with quiet decode phases check them, and
    without prefix caching the blocks they hand out are vLLM's own ids."""
    fast = 0
    for name in ("offload-quiet-decode", "offload-quiet-nocache"):
        requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
        reference = list(read_steps(REF / f"{name}.steps.jsonl"))
        lines, paths = run_mirror_paths(requests, config, False)
        assert compare(reference, lines)["first_divergence"] is None
        fast += paths["mirror_fast_path_steps"]
        if not config.get("enable_prefix_caching"):
            assert [(x["kv_load"], x["kv_store"]) for x in lines] == [
                (x["kv_load"], x["kv_store"]) for x in reference]
    assert fast >= 1000


# the README's probe_offload.py scenarios (block_size 4, a 32-chunk CPU tier)
_PROBE = {"block_size": 4, "max_num_seqs": 4, "max_num_batched_tokens": 16, "max_model_len": 64,
          "kv_offload_cpu_blocks": 32}
_A = list(range(11, 24))  # 13 tokens: 3 full blocks


def _req(rid: str, tick: int, ids: list[int] | None = None, n: int = 0, out: int = 2) -> Request:
    return Request(id=rid, prompt_tokens=len(ids) if ids else n, max_output_tokens=out, arrival_tick=tick,
                   prompt_token_ids=tuple(ids) if ids else None)


def _evict_reload(**extra) -> list[dict]:
    reqs = [_req("A", 0, _A), _req("B", 3, list(range(31, 52))), _req("C", 8, _A + [99])]
    _, lines, _ = mirror_run(reqs, {**_PROBE, "num_gpu_blocks": 9, "enable_prefix_caching": True, **extra})
    return lines


def test_gpu_evicted_prefix_reloads_from_the_cpu_tier() -> None:
    by_step = {x["step"]: x for x in _evict_reload()}
    # B evicted A's blocks from the GPU cache: C hits 8 tokens locally, 4 more in the CPU tier,
    # loads them asynchronously and waits one step with nothing scheduled for it
    assert by_step[8]["kv_lookup"] == [["C", 8, 4, 1]] and by_step[8]["kv_admit"] == [["C", 4]]
    assert by_step[8]["sched"] == [] and by_step[8]["waiting_for_kv"] == ["C"]
    assert [e[0] for e in by_step[8]["kv_load"]] == ["C"] and by_step[8]["kv_done"] == [by_step[8]["kv_load"][0][1]]
    assert by_step[9]["sched"] == [["C", 2, "new", 12]] and by_step[9]["waiting_for_kv"] == []


def test_a_slower_load_keeps_the_request_waiting() -> None:
    by_step = {x["step"]: x for x in _evict_reload(kv_offload_load_steps=2)}
    assert [by_step[t]["waiting_for_kv"] for t in (8, 9, 10)] == [["C"], ["C"], ["C"]]
    assert by_step[10]["kv_done"] == [by_step[8]["kv_load"][0][1]]
    assert by_step[11]["sched"] == [["C", 2, "new", 12]]


def test_a_preempted_request_reloads_its_prompt_without_prefix_caching() -> None:
    reqs = [_req(f"P{i}", 0, n=8, out=12) for i in range(3)]
    summary, lines, _ = mirror_run(reqs, {**_PROBE, "num_gpu_blocks": 10})
    preempted = [p for x in lines for p in x["preempted"]]
    assert preempted
    resumed = [e for x in lines for e in x["sched"] if e[2] == "resumed"]
    # the resumed request's prompt (8 tokens, 2 blocks) came back from the CPU tier
    assert resumed and all(e[3] >= 8 for e in resumed)
    assert summary["kv_offload"]["loaded_tokens"] >= 8 * len(resumed)
    assert summary["kv_offload"]["requests_waited_for_kv"] == len(set(preempted))


def test_cpu_tier_lru_is_vllms_request_ranked_one() -> None:
    tier = CpuTier(4)
    a = TierRequest({"a1": 16, "a2": 32})
    assert tier.prepare_store(["a1", "a2"], a) == (["a1", "a2"], [0, 1])
    assert tier.lookup("a1") == PENDING and tier.lookup("zz") == MISS
    tier.complete_store(["a1", "a2"])
    assert tier.lookup("a1") == HIT
    tier.request_finished(a)  # head ranked most recent: a2 goes before a1
    b = TierRequest({"b1": 16, "b2": 32})
    assert tier.prepare_store(["b1", "b2"], b) == (["b1", "b2"], [2, 3])
    tier.complete_store(["b1", "b2"])
    c = TierRequest({"c1": 16})
    # full: the lowest rank goes, a2 (a's tail, ranked before its head); its chunk is reused
    assert tier.prepare_store(["c1"], c) == (["c1"], [1])
    assert tier.lookup("a2") == MISS and tier.lookup("a1") == HIT
    # a load pins a chunk; with every other chunk pinned or being written a store fails
    tier.prepare_load(["a1"], TierRequest({"a1": 16}))
    tier.prepare_load(["b1", "b2"], TierRequest({"b1": 16, "b2": 32}))
    assert tier.prepare_store(["d1"], TierRequest({"d1": 16})) is None
    tier.complete_load(["a1"])
    assert tier.prepare_store(["d1"], TierRequest({"d1": 16})) == (["d1"], [0])  # a1 evicted now
    assert tier.evictions == 2


def test_store_threshold_stores_on_the_second_offer() -> None:
    tier = CpuTier(8, store_threshold=2)
    ctx = TierRequest({"k": 16})
    assert tier.prepare_store(["k"], ctx) == ([], [])
    assert tier.prepare_store(["k"], TierRequest({"k": 16})) == (["k"], [0])
    assert tier.skipped_stores == 1


def test_timed_loads_take_bytes_over_the_host_link() -> None:
    from tickgate.timing.roofline import RooflineTiming

    timing = RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB"})
    prompt = list(range(1000, 1000 + 4096))
    reqs = [Request(id="A", prompt_tokens=4096, max_output_tokens=1, arrival_ms=0.0, prompt_token_ids=tuple(prompt)),
            Request(id="B", prompt_tokens=8192, max_output_tokens=1, arrival_ms=100.0,
                    prompt_token_ids=tuple(range(50_000, 58_192))),
            Request(id="C", prompt_tokens=4097, max_output_tokens=2, arrival_ms=200.0,
                    prompt_token_ids=tuple(prompt + [7]))]
    base = {"block_size": 16, "num_gpu_blocks": 600, "max_num_seqs": 8, "max_num_batched_tokens": 8192,
            "enable_prefix_caching": True, "kv_offload_cpu_blocks": 4096}
    ttft = {}
    loaded = set()
    for bw in (1.0, 64.0):
        summary, _, _, outcomes = mirror_run_outcomes(reqs, {**base, "kv_offload_host_bandwidth_gb_s": bw}, timing)
        loaded.add(summary["kv_offload"]["loaded_tokens"])  # B evicted part of A's prompt from the GPU
        c = next(o for o in outcomes if o.id == "C")
        ttft[bw] = c.first_token_ms - c.arrival_ms
    (tokens,) = loaded
    assert tokens >= 1024
    # nothing else runs while C waits: the engine idles until the load's bytes are over the link
    # (128 KiB a token for llama-3.1-8b: 1 GB/s moves 1e6 bytes a ms)
    moved_ms = tokens * timing.kv_token_bytes / 1e6
    assert ttft[1.0] - ttft[64.0] == pytest.approx(moved_ms - moved_ms / 64, rel=1e-6)


def test_option_errors_are_named() -> None:
    from tickgate import validate
    from tickgate_vllm.v1.options import OPTIONS_SCHEMA

    base = {"block_size": 16, "num_gpu_blocks": 100, "max_num_seqs": 8, "max_num_batched_tokens": 256}
    with pytest.raises(InputError, match="sync_load_budget_bytes"):
        validate({**base, "kv_offload_cpu_blocks": 8, "kv_offload_extra_config": {"sync_load_budget_bytes": 1}},
                 OPTIONS_SCHEMA, file="p.yaml")
    with pytest.raises(InputError, match="kv_offload_load_steps"):
        validate({**base, "kv_offload_load_steps": -1}, OPTIONS_SCHEMA, file="p.yaml")
    with pytest.raises(InputError, match="blocks_per_chunk"):
        validate({**base, "kv_offload_extra_config": {"blocks_per_chunk": 0}}, OPTIONS_SCHEMA, file="p.yaml")


def test_no_offload_changes_nothing() -> None:
    """kv_offload_cpu_blocks: 0 is the replay without the option (the fast paths included)."""
    reqs = [_req(f"q{i}", i, n=40 + i, out=20) for i in range(12)]
    opts = {"block_size": 16, "num_gpu_blocks": 30, "max_num_seqs": 4, "max_num_batched_tokens": 64}
    plain = mirror_run(reqs, opts)
    off = mirror_run(reqs, {**opts, "kv_offload_cpu_blocks": 0})
    assert plain[1] == off[1] and "kv_offload" not in off[0]


def test_offload_replay_is_identical_across_hash_seeds(tmp_path: Path) -> None:
    name = "offload-small-tier"
    doc = json.loads((REF / f"{name}.workload.json").read_text())
    outs = replay_reports_across_hash_seeds(doc, tmp_path, ("0", "4242"))
    assert outs[0] == outs[1]
    report = json.loads(outs[0])
    assert report["scheduler"]["kv_offload"]["store_failures"] > 0
    assert report["scheduler"]["kv_offload"]["cpu_evictions"] > 0


def test_fast_paths_give_the_full_steps_report(tmp_path: Path) -> None:
    """Offload's fast paths decide what the full step does: the same fingerprint, KV figures
    and scheduler report as with every step in full (``max_span: 1``)."""
    doc = json.loads((REF / "offload-quiet-decode.workload.json").read_text())
    fast, = replay_reports_across_hash_seeds(doc, tmp_path, ("0",))
    slow, = replay_reports_across_hash_seeds(doc, tmp_path, ("0",), {"max_span": 1})
    a, b = json.loads(fast), json.loads(slow)
    for key in ("summary", "pressure", "utilization", "scheduler"):
        assert a[key] == b[key], key
    assert a["scheduler"]["kv_offload"]["loaded_tokens"] > 0


def test_sweep_tool_draws_seeded_cases_and_compares_a_directory(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    tool = REPO / "adapters" / "vllm" / "tools" / "sweep_reference.py"

    def cases(seed: int) -> bytes:
        out = tmp_path / f"c{seed}.json"
        subprocess.run([sys.executable, str(tool), "cases", "--kind", "offload", "--seed", str(seed), "-n", "4",
                        "--out", str(out)], check=True, capture_output=True)
        return out.read_bytes()

    assert cases(5) == cases(5) != cases(6)
    drawn = json.loads(cases(5))
    assert [c["name"] for c in drawn] == [f"offload-{5 + i}" for i in range(4)]
    assert all(c["config"]["kv_offload_cpu_blocks"] > 0 for c in drawn)
    rec = tmp_path / "rec"
    rec.mkdir()
    for suffix in (".workload.json", ".steps.jsonl"):
        shutil.copy(REF / f"offload-quiet-nocache{suffix}", rec / f"offload-quiet-nocache{suffix}")
    done = subprocess.run([sys.executable, str(tool), "compare", str(rec)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "offload-quiet-nocache fast: 926/926 identical" in done.stdout
    steps = (rec / "offload-quiet-nocache.steps.jsonl").read_text().splitlines()
    line = json.loads(steps[100])
    line["free_blocks"] += 1
    steps[100] = json.dumps(line)
    (rec / "offload-quiet-nocache.steps.jsonl").write_text("\n".join(steps) + "\n")
    done = subprocess.run([sys.executable, str(tool), "compare", str(rec)], capture_output=True, text=True)
    assert done.returncode == 1 and "free_blocks differs" in done.stdout
