"""vllm-v1 scheduler semantics, fast-forwarding and reports (beyond the recorded traces)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.testing import run_cli
from tickgate import InputError
from tickgate import Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate_vllm.conformance import load_reference_workload, scheduler_options

REPO = Path(__file__).resolve().parents[3]


REF = REPO / "fixtures" / "vllm-reference"
TIMING = {"fixed_ms": 5.0, "per_prefill_token_ms": 0.03, "per_decode_seq_ms": 0.25,
          "per_context_token_ms": 0.001}


def policy(tmp_path: Path, options: dict[str, Any], timing: dict[str, float] | None = None,
           name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "vllm-v1", "options": options}}
    if timing:
        doc["timing"] = timing
    path = tmp_path / name
    path.write_text(json.dumps(doc))  # JSON is YAML
    return load_policy(path)


def base(**over: Any) -> dict[str, Any]:
    opts = {"block_size": 4, "num_gpu_blocks": 33, "max_num_seqs": 8, "max_num_batched_tokens": 64}
    opts.update(over)
    return opts


def req(rid: str, prompt: int | list[int], out: int, tick: int = 0, **kw: Any) -> Request:
    if isinstance(prompt, list):
        return Request(id=rid, prompt_tokens=len(prompt), max_output_tokens=out, arrival_tick=tick,
                       prompt_token_ids=tuple(prompt), **kw)
    return Request(id=rid, prompt_tokens=prompt, max_output_tokens=out, arrival_tick=tick, **kw)


@pytest.mark.parametrize("name", ["pressure-preempt-fcfs", "prefix-priority-evict", "full-isl-off-block8",
                                  "max-model-len-cap"])
def test_fast_forward_never_changes_a_decision(tmp_path: Path, name: str) -> None:
    requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
    opts = scheduler_options(config)
    fast = replay(requests, policy(tmp_path, opts, name="a.yaml"))
    slow = replay(requests, policy(tmp_path, {**opts, "max_span": 1}, name="b.yaml"))
    assert fast["summary"]["trace_fingerprint"] == slow["summary"]["trace_fingerprint"]
    assert fast["summary"]["total_ticks"] == slow["summary"]["total_ticks"]
    assert fast["scheduler"] == slow["scheduler"]
    assert [o["id"] for o in fast["outcomes"]] == [o["id"] for o in slow["outcomes"]]
    spans = [t["span"] for t in fast["ticks"]]
    assert max(spans) > 10 and len(spans) < slow["summary"]["total_ticks"]


def test_fast_forward_with_timed_arrivals(tmp_path: Path) -> None:
    requests, config = load_reference_workload(REF / "pressure-preempt-priority.workload.json", None)
    # arrivals in ms, deliberately not on step boundaries
    timed = [Request(id=r.id, prompt_tokens=r.prompt_tokens, max_output_tokens=r.max_output_tokens,
                     priority=r.priority, arrival_ms=r.arrival_tick * 7.3 + 0.37) for r in requests]
    opts = scheduler_options(config)
    fast = replay(timed, policy(tmp_path, opts, TIMING, "a.yaml"))
    slow = replay(timed, policy(tmp_path, {**opts, "max_span": 1}, TIMING, "b.yaml"))
    assert fast["summary"]["trace_fingerprint"] == slow["summary"]["trace_fingerprint"]
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        for q in ("p50", "p90", "p95", "p99"):
            assert fast["latency"][key][q] == pytest.approx(slow["latency"][key][q], abs=1e-3)
    assert fast["latency"]["ttft_ms"]["p99"] >= fast["latency"]["ttft_ms"]["p50"] > 0


def test_prefix_hits_are_whole_blocks_capped_below_the_prompt(tmp_path: Path) -> None:
    same = list(range(100, 108))  # two blocks of 4
    nine = same + [999]
    reqs = [req("A", same, 1, 0), req("B", same, 1, 3), req("C", nine, 1, 6), req("D", nine, 1, 9)]
    rep = replay(reqs, policy(tmp_path, base(enable_prefix_caching=True)))
    hits = {o["id"]: o.get("prefix_hit_tokens", 0) for o in rep["outcomes"]}
    # B: 8 tokens cached but the hit stops at num_tokens - 1 -> one block;
    # C: both blocks of the shared 8; D: C's blocks (its 9th token is partial).
    assert hits == {"A": 0, "B": 4, "C": 8, "D": 8}
    assert rep["scheduler"]["prefix_cache"]["hit_tokens"] == 20
    sched = [e for t in rep["ticks"] for e in t["detail"]["sched"] if e[2] == "new"]
    assert [e[3] for e in sched] == [0, 4, 8, 8]


def test_prefix_blocks_ids_are_chained(tmp_path: Path) -> None:
    reqs = [req("A", 12, 1, 0, prefix_blocks=(7, 8, 9)), req("B", 13, 1, 3, prefix_blocks=(7, 8, 9)),
            req("C", 13, 1, 6, prefix_blocks=(5, 8, 9))]
    rep = replay(reqs, policy(tmp_path, base(enable_prefix_caching=True)))
    hits = {o["id"]: o.get("prefix_hit_tokens", 0) for o in rep["outcomes"]}
    assert hits == {"A": 0, "B": 12, "C": 0}  # same ids after a different first block do not hit


def test_no_prefix_caching_means_no_hits(tmp_path: Path) -> None:
    same = list(range(100, 120))
    rep = replay([req("A", same, 2, 0), req("B", same, 2, 5)], policy(tmp_path, base()))
    assert rep["scheduler"]["prefix_cache"]["hit_tokens"] == 0


def test_evicted_blocks_stop_hitting(tmp_path: Path) -> None:
    # 9 usable blocks. A frees tail first, so its 2nd cached block is the LRU
    # front: X's 8 blocks take the 7 anonymous free ones, then evict exactly it.
    a = list(range(100, 108))
    reqs = [req("A", a + [1], 1, 0), req("X", 30, 1, 3), req("B", a + [2], 1, 6)]
    rep = replay(reqs, policy(tmp_path, base(num_gpu_blocks=10, enable_prefix_caching=True)))
    hits = {o["id"]: o.get("prefix_hit_tokens", 0) for o in rep["outcomes"]}
    assert hits["B"] == 4
    roomy = replay(reqs, policy(tmp_path, base(num_gpu_blocks=20, enable_prefix_caching=True), name="q.yaml"))
    assert {o["id"]: o.get("prefix_hit_tokens", 0) for o in roomy["outcomes"]}["B"] == 8


def test_fcfs_preempts_the_newest_priority_the_worst(tmp_path: Path) -> None:
    reqs = [req("P0", 8, 12, priority=5), req("P1", 8, 12, priority=0), req("P2", 8, 12, priority=1)]
    out = {}
    for pol in ("fcfs", "priority"):
        rep = replay(reqs, policy(tmp_path, base(num_gpu_blocks=10, policy=pol), name=f"{pol}.yaml"))
        out[pol] = [p for t in rep["ticks"] for p in t["preempted"]]
        assert rep["summary"]["completed_requests"] == 3
        assert rep["scheduler"]["preemptions"] == len(out[pol]) * 1 > 0
    assert out["fcfs"][0] == "P2" and out["priority"][0] == "P0"


def test_requests_that_can_never_fit_are_rejected_with_a_reason(tmp_path: Path) -> None:
    reqs = [req("HUGE", 40, 1), req("tiny", 4, 1), req("long", 70, 1)]
    rep = replay(reqs, policy(tmp_path, base(num_gpu_blocks=5, max_model_len=64)))
    reasons = {o["id"]: o.get("reason") for o in rep["outcomes"] if o["status"] == "rejected"}
    assert set(reasons) == {"HUGE", "long"}
    assert "needs 10 KV blocks" in reasons["HUGE"] and "max_model_len" in reasons["long"]
    assert rep["summary"]["completed_requests"] == 1


def test_output_is_capped_at_max_model_len(tmp_path: Path) -> None:
    rep = replay([req("A", 10, 50)], policy(tmp_path, base(max_model_len=16)))
    (o,) = rep["outcomes"]
    assert o["output_tokens"] == 6 and o["flags"] == ["length_capped"]


def test_an_admission_section_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nscheduler:\n  name: vllm-v1\n  options: {block_size: 16, num_gpu_blocks: 64,"
                    " max_num_seqs: 4, max_num_batched_tokens: 64}\nadmission:\n  name: priority-fcfs\n")
    pol = load_policy(path)
    with pytest.raises(InputError, match="orders its own queue"):
        replay([req("A", 4, 1)], pol)


def test_bad_option_is_located(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nscheduler:\n  name: vllm-v1\n  options:\n    block_size: 16\n"
                    "    num_gpu_blocks: 64\n    max_num_seqs: 4\n    max_num_batched_tokens: 64\n"
                    "    policy: lifo\n")
    with pytest.raises(InputError) as err:
        load_policy(path)
    assert ":9:" in str(err.value) and "$.scheduler.options.policy" in str(err.value)


def _workload_files() -> list[Path]:
    out = []
    for path in sorted((REPO / "fixtures").rglob("*.json")):
        if "vllm-reference" in path.parts or "invalid" in path.parts:
            continue
        try:
            head = path.open().readline()
        except (OSError, UnicodeDecodeError):
            continue
        if head.startswith('{"version": 1') and '"requests"' in head:
            out.append(path)
    return out


@pytest.mark.parametrize("preset", ["vllm-v1-bench", "vllm-v1-priority"])
def test_presets_replay_the_fixture_workloads(tmp_path: Path, preset: str) -> None:
    from tickgate.workload.format import read_workload

    files = _workload_files()
    assert files
    pol = load_policy(REPO / "policies" / f"{preset}.yaml")
    for path in files:
        try:
            wl = read_workload(path)
            requests = list(wl.requests)
        except InputError:
            continue  # not a valid workload fixture (error-corpus files)
        rep = replay(requests, pol)
        assert rep["summary"]["request_count"] == len(requests), path
        assert rep["requests"]["completed"] + rep["requests"]["rejected"] == len(requests), path
        lat = rep["latency"]
        if rep["requests"]["completed"]:
            assert set(lat["ttft_ms"]) >= {"p50", "p90", "p95", "p99"}, path
            assert lat["output_tokens_per_s"] > 0


def test_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    requests, config = load_reference_workload(REF / "prefix-fcfs.workload.json", None)
    from tickgate.util.atomic import write_json
    from tickgate.workload.format import WorkloadHeader, write_workload

    wl = tmp_path / "w.json"
    with wl.open("w") as fh:
        write_workload(fh, WorkloadHeader(block_size=16), requests)
    pol = tmp_path / "p.yaml"
    write_json(pol, {"version": 1, "scheduler": {"name": "vllm-v1", "options": scheduler_options(config)},
                     "timing": TIMING})
    outs = []
    for seed in ("0", "12345"):
        out = tmp_path / f"r{seed}.json"
        res = run_cli("replay", "--input", str(wl), "--policy", str(pol), "--output", str(out), "--quiet",
                      env={"PYTHONHASHSEED": seed})
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes().replace(str(tmp_path).encode(), b""))
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["scheduler"]["prefix_cache"]["hit_tokens"] == 10640


def test_outcome_fields_land_where_they_belong() -> None:
    """The outcome is built positionally (speed): every field by name, distinct values."""
    import attrs

    from tickgate_vllm.v1.scheduler import RequestState, VllmV1Scheduler

    r = Request(id="R", prompt_tokens=100, max_output_tokens=60, arrival_ms=5.5, priority=3, tenant="t",
                lane="l", deadline_ms=8.0)
    q = RequestState(r, ordinal=1, prompt_keys=[], tick=2, arrival_ms=5.5)
    q.admitted_tick, q.admitted_ms, q.first_token_tick, q.first_token_ms = 3, 6.5, 4, 7.25
    q.num_output_tokens, q.num_preemptions, q.first_hit_tokens = 50, 1, 16
    out = VllmV1Scheduler._outcome(None, q, 9, 9.75)  # type: ignore[arg-type]
    assert attrs.asdict(out) == {
        "id": "R", "status": "completed", "arrival_tick": 2, "reason": None, "admitted_tick": 3,
        "first_token_tick": 4, "finished_tick": 9, "output_tokens": 50, "prompt_tokens": 100,
        "preemptions": 1, "prefix_hit_tokens": 16, "priority": 3, "tenant": "t", "lane": "l",
        "deadline_missed": True, "arrival_ms": 5.5, "admitted_ms": 6.5, "first_token_ms": 7.25,
        "finished_ms": 9.75, "flags": ("length_capped",), "reason_key": None, "reason_figures": (),
    }


_request = st.tuples(st.integers(1, 60), st.integers(1, 40), st.integers(0, 3), st.integers(0, 6),
                     st.integers(0, 2))  # prompt, output, priority, arrival gap, shared-prefix family


@settings(max_examples=60, deadline=None)
@given(reqs=st.lists(_request, min_size=1, max_size=14), blocks=st.integers(6, 40),
       caching=st.booleans(), policy_name=st.sampled_from(["fcfs", "priority"]),
       timed=st.booleans(), maxlen=st.sampled_from([None, 90]))
def test_fast_forward_never_changes_a_decision_on_random_traffic(
        tmp_path_factory: pytest.TempPathFactory, reqs: list[tuple[int, int, int, int, int]], blocks: int,
        caching: bool, policy_name: str, timed: bool, maxlen: int | None) -> None:
    """Spans (one gathering pass, the allocation bound, keyless blocks) against one step
    at a time, on small pools that preempt, shared prefixes, timed and untimed arrivals."""
    tmp_path = tmp_path_factory.mktemp("ff")
    workload, at = [], 0
    for i, (prompt, out, prio, gap, family) in enumerate(reqs):
        at += gap
        ids = tuple(range(family * 100, family * 100 + prompt // 4 + 1))  # one id per started block of 4
        arrival = {"arrival_ms": at * 3.7 + 0.25} if timed else {"arrival_tick": at}
        workload.append(Request(id=f"r{i}", prompt_tokens=prompt, max_output_tokens=out, priority=prio,
                                prefix_blocks=ids, **arrival))
    opts = {**base(num_gpu_blocks=blocks, enable_prefix_caching=caching, policy=policy_name)}
    if maxlen is not None:
        opts["max_model_len"] = maxlen
    timing = TIMING if timed else None
    inputs = {"block_size": 4}
    try:
        fast = replay(workload, policy(tmp_path, opts, timing, "a.yaml"), inputs=inputs)
    except InputError:
        return  # a configuration vLLM refuses, refused alike either way
    slow = replay(workload, policy(tmp_path, {**opts, "max_span": 1}, timing, "b.yaml"), inputs=inputs)
    assert fast["summary"] == slow["summary"]
    assert fast["scheduler"] == slow["scheduler"]
    assert fast["requests"] == slow["requests"]
    assert fast["outcomes"] == slow["outcomes"]


@pytest.mark.parametrize("maxlen", [None, 120])
def test_the_decode_group_takes_every_step_of_steady_fcfs_traffic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, maxlen: int | None) -> None:
    """With prompts that fit one step, no preemption and nothing resumed, every
    step after the first is the group's: arrivals, completions and spans alike
    (the per-request paths would give the same report, only slower)."""
    from tickgate_vllm.v1.scheduler import VllmV1Scheduler

    per_request = ("_full_step_fcfs", "_fresh_span", "_finishing_decode_step", "_steady_span")
    calls = {name: 0 for name in per_request + ("_group_step", "_group_span")}
    for name in calls:
        original = getattr(VllmV1Scheduler, name)

        def counted(self: Any, *args: Any, _original: Any = original, _name: str = name) -> Any:
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(VllmV1Scheduler, name, counted)
    reqs = [req(f"r{i}", 10 + (7 * i) % 50, 3 + (5 * i) % 70, tick=3 * i, prefix_blocks=(i % 3, 10 + i))
            for i in range(40)]
    opts = base(num_gpu_blocks=400, enable_prefix_caching=True)
    if maxlen is not None:
        opts["max_model_len"] = maxlen
    rep = replay(reqs, policy(tmp_path, opts), inputs={"block_size": 4})
    assert rep["summary"]["completed_requests"] == 40
    assert calls["_group_step"] > 40 and calls["_group_span"] > 40
    assert {name: calls[name] for name in per_request} == {name: 0 for name in per_request}
