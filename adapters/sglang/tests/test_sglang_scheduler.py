"""Scenario tests of the ``sglang`` scheduler mirror.

Each test encodes one documented SGLang behaviour; the docstring names the
source (paths in the sgl-project/sglang repository).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


from tickgate import InputError
from tickgate import Request
from tickgate.host.registry import get_registry
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests
from tickgate.workload.format import read_workload

REPO = Path(__file__).resolve().parents[3]
AZURE = REPO / "fixtures" / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"
TIMING = {"fixed_ms": 2.0, "per_prefill_token_ms": 0.01, "per_decode_seq_ms": 0.1}


def run(tmp_path: Path, options: dict[str, Any], requests: list[Request], *, timing: bool = False,
        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "sglang", "options": options}}
    if timing:
        doc["timing"] = TIMING
    doc.update(extra or {})
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return replay(requests, load_policy(path))


def req(rid: str, prompt: int, out: int, tick: int = 0, **kw: Any) -> Request:
    return Request(id=rid, prompt_tokens=prompt, max_output_tokens=out, arrival_tick=tick, **kw)


def ticks(report: dict[str, Any]) -> list[dict[str, Any]]:
    return report["ticks"]


def outcome(report: dict[str, Any], rid: str) -> dict[str, Any]:
    return next(o for o in report["outcomes"] if o["id"] == rid)


def test_registered_through_the_adapter_entry_point() -> None:
    info = get_registry().get("scheduler", "sglang")
    assert info.distribution == "tickgate-sglang"


def test_policy_with_admission_or_kv_allocator_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="schedule_policy"):
        run(tmp_path, {"max_total_tokens": 1000}, [req("a", 10, 2)], extra={"admission": {"name": "priority-fcfs"}})
    with pytest.raises(InputError, match="own KV cache"):
        run(tmp_path, {"max_total_tokens": 1000}, [req("a", 10, 2)], extra={"kv_allocator": {"name": "paged"}})


def test_prefill_and_decode_never_share_a_step(tmp_path: Path) -> None:
    """scheduler.py get_next_batch_to_run: a new prefill batch runs instead of
    the decode batch (no mixed chunk by default); the prefill emits the first token."""
    rep = run(tmp_path, {"max_total_tokens": 4000}, [req("a", 40, 4), req("b", 30, 3, tick=2)])
    for t in ticks(rep):
        assert not (t["prefill_tokens"] and t["decode_tokens"])
    assert [t["detail"]["batch"] for t in ticks(rep)][:4] == ["prefill", "decode", "prefill", "decode"]
    a = outcome(rep, "a")
    assert a["first_token_tick"] == 0 and a["output_tokens"] == 4


def test_radix_cache_hits_shared_prefix_blocks_and_caps_at_prompt_minus_one(tmp_path: Path) -> None:
    """radix_cache.py match_prefix + schedule_batch.py Req.init_next_round_input:
    the cached prefix is reused, but at least one token is always computed."""
    shared = (1, 2, 3, 4)
    reqs = [req("a", 96, 2, prefix_blocks=shared + (10, 11)),
            req("b", 80, 2, tick=3, prefix_blocks=shared + (20,)),
            req("c", 64, 2, tick=6, prefix_blocks=shared)]
    rep = run(tmp_path, {"max_total_tokens": 4000, "prefix_block_size": 16}, reqs)
    assert outcome(rep, "a").get("prefix_hit_tokens", 0) == 0
    assert outcome(rep, "b")["prefix_hit_tokens"] == 64
    # the 64-token prompt is fully cached: capped to 63 tokens (pages of 1; blocks are matched page by page)
    assert outcome(rep, "c")["prefix_hit_tokens"] == 63
    s = rep["scheduler"]
    assert s["prefix_hit_tokens"] == 127
    assert s["prefix_hit_rate"] == round(127 / (96 + 80 + 64), 6)


def test_token_id_prompts_hit_at_page_granularity(tmp_path: Path) -> None:
    ids = tuple(range(50))
    reqs = [req("a", 50, 2, prompt_token_ids=ids), req("b", 50, 2, tick=3, prompt_token_ids=ids[:45] + (99,) * 5)]
    rep = run(tmp_path, {"max_total_tokens": 4000, "page_size": 4}, reqs)
    assert outcome(rep, "b")["prefix_hit_tokens"] == 44  # 11 whole pages of 4


def test_fcfs_stops_at_the_first_request_that_does_not_fit(tmp_path: Path) -> None:
    """schedule_policy.py PrefillAdder.add_one_req returns NO_TOKEN when
    extend + max_new >= available + evictable - reserved, and
    get_new_batch_prefill breaks: later, smaller requests do not overtake."""
    reqs = [req("big", 300, 300), req("huge", 500, 400), req("small", 10, 2)]
    rep = run(tmp_path, {"max_total_tokens": 1000}, reqs)
    first = ticks(rep)[0]
    assert first["admitted"] == ["big"]
    small = outcome(rep, "small")
    assert small["admitted_tick"] >= outcome(rep, "huge")["admitted_tick"]


def test_new_token_ratio_reserves_room_for_running_requests(tmp_path: Path) -> None:
    """PrefillAdder: rem_total_tokens subtracts running requests' remaining
    output times new_token_ratio (init 0.7 * schedule_conservativeness)
    (schedule_policy.py _get_running_request_total_token_offset, add_one_req)."""
    reqs = [req("a", 100, 800), req("b", 200, 10, tick=1)]
    # free after a's prefill: 1000 - 100 = 900; reserved 0.7 * 799 = 559.3; b needs 200 + 10 + 1 page < 340.7
    rep = run(tmp_path, {"max_total_tokens": 1000}, reqs)
    assert outcome(rep, "b")["admitted_tick"] == 1
    # conservativeness 1.4 -> ratio 0.98: reserved 783 leaves 117 < 210, b waits
    rep = run(tmp_path, {"max_total_tokens": 1000, "schedule_conservativeness": 1.4}, reqs)
    assert outcome(rep, "b")["admitted_tick"] > 1


def test_new_token_ratio_decays_each_decode_step_to_its_floor(tmp_path: Path) -> None:
    """scheduler.py update_running_batch: new_token_ratio -= decay, floored at
    min_new_token_ratio; decay = (init - min) / new_token_ratio_decay_steps."""
    rep = run(tmp_path, {"max_total_tokens": 1000, "init_new_token_ratio": 0.5, "min_new_token_ratio": 0.3,
                         "new_token_ratio_decay_steps": 4}, [req("a", 10, 8)])
    ratios = [t["detail"]["new_token_ratio"] for t in ticks(rep) if t["detail"]["batch"] == "decode"]
    assert ratios == [0.45, 0.4, 0.35, 0.3, 0.3, 0.3, 0.3]


def test_max_prefill_tokens_bounds_a_batch_after_its_first_request(tmp_path: Path) -> None:
    """_select_prefill_admission: without chunking, input_tokens >= rem_input_tokens
    stops the batch only when can_run_list is not empty: the first request may
    exceed max_prefill_tokens."""
    reqs = [req("a", 300, 2), req("b", 50, 2)]
    rep = run(tmp_path, {"max_total_tokens": 4000, "max_prefill_tokens": 256, "chunked_prefill_size": -1}, reqs)
    assert ticks(rep)[0]["admitted"] == ["a"]
    assert ticks(rep)[1]["admitted"] == ["b"]


def test_chunked_prefill_splits_a_long_prompt_and_emits_after_the_last_chunk(tmp_path: Path) -> None:
    """add_one_req: a prompt larger than rem_chunk_tokens is truncated to a
    chunk and continued first in the next prefill (add_chunked_req)."""
    rep = run(tmp_path, {"max_total_tokens": 4000, "chunked_prefill_size": 32}, [req("a", 100, 3)])
    prefill = [t["detail"]["scheduled"]["a"] for t in ticks(rep) if t["prefill_tokens"]]
    assert prefill == [32, 32, 32, 4]
    assert outcome(rep, "a")["first_token_tick"] == 3
    assert rep["scheduler"]["prefill_chunks"] == 4


def test_decode_retraction_frees_fewest_output_longest_prompt_first(tmp_path: Path) -> None:
    """schedule_batch.py retract_decode: when the next decode does not fit,
    requests are retracted sorted by (output len, -prompt len), smallest
    first, until the next decode of the rest fits; they requeue and
    recompute prompt + output; new_token_ratio is re-estimated."""
    options = {"max_total_tokens": 520, "chunked_prefill_size": -1, "init_new_token_ratio": 0.05,
               "min_new_token_ratio": 0.05}
    # equal output counts (a and b share the first prefill, c is prefilled while they would decode):
    # the longest prompt goes first
    tied = run(tmp_path, options, [req("a", 100, 140), req("b", 120, 140), req("c", 40, 140, tick=1)])
    assert next(t for t in ticks(tied) if t["preempted"])["preempted"][0] == "b"
    reqs = [req("a", 100, 150), req("b", 120, 150), req("c", 40, 150, tick=5)]
    rep = run(tmp_path, options, reqs)
    retracting = [t for t in ticks(rep) if t["preempted"]]
    assert retracting, "the pool is too small for three decodes"
    first = retracting[0]
    # c started decoding four steps after a and b: it has the fewest output tokens
    assert first["preempted"][0] == "c"
    assert first["detail"]["new_token_ratio"] > 0.05
    assert rep["summary"]["completed_requests"] == 3
    assert rep["scheduler"]["retractions"] == rep["requests"]["preemptions"] >= 1
    assert outcome(rep, "c")["preemptions"] >= 1
    assert outcome(rep, "c")["output_tokens"] == 150
    assert rep["summary"]["final_kv_pages"] == 0


def test_requests_too_long_are_rejected_and_max_new_tokens_clipped(tmp_path: Path) -> None:
    """scheduler.py handle_generate_request: max_new_tokens is capped at
    max_req_len - prompt - 1; a prompt that leaves no room is refused."""
    rep = run(tmp_path, {"max_total_tokens": 200}, [req("long", 198, 5), req("clip", 100, 500)])
    assert outcome(rep, "long")["status"] == "rejected"
    clip = outcome(rep, "clip")
    assert clip["output_tokens"] == 98 and clip["flags"] == ["max_new_tokens_clipped"]


def test_ignore_eos_without_the_radix_cache_admits_by_when_requests_finish(tmp_path: Path) -> None:
    """schedule_policy.py:1401-1402: ignore_eos with the tree disabled takes
    add_one_req_ignore_eos, which admits b while the pool outlasts the shortest
    remaining outputs (b's 300 tokens, then a's 599 with b's 100 freed), where
    add_one_req wants b's extend + whole output beside a's 599 reserved up front."""
    reqs = [req("a", 100, 600), req("b", 100, 300, tick=1)]
    opts = {"max_total_tokens": 1000, "ignore_eos": True}
    off = run(tmp_path, {**opts, "disable_radix_cache": True}, reqs)
    on = run(tmp_path, opts, reqs)
    assert outcome(off, "b")["admitted_tick"] == 1
    assert outcome(on, "b")["admitted_tick"] > 1


def test_ignore_eos_states_keep_sglangs_sorted_insert() -> None:
    """add_req_state's insert loop (schedule_policy.py:1271-1276) leaves its index
    at the last entry when no entry outlasts the new request, so that request goes
    in before the last one, not at the end; the check walks them in that order."""
    from types import SimpleNamespace

    from tickgate_sglang.prefill_adder import _add_req_state

    def r(max_new: int, out: int, prompt: int) -> SimpleNamespace:
        return SimpleNamespace(max_new_tokens=max_new, out=out, request=SimpleNamespace(prompt_tokens=prompt))

    states: list[tuple[float, int]] = []
    _add_req_state(states, r(50, 0, 10), insert_sort=True)
    _add_req_state(states, r(20, 0, 20), insert_sort=True)
    _add_req_state(states, r(90, 0, 30), insert_sort=True)  # outlasts both: before the last
    _add_req_state(states, r(40, 40, 40), insert_sort=True)  # nothing left to decode: not counted
    assert states == [(20.0, 20), (90.0, 30), (50.0, 10)]


def _order(tmp_path: Path, policy: str, reqs: list[Request], **opts: Any) -> list[str]:
    rep = run(tmp_path, {"max_total_tokens": 100000, "max_running_requests": 1, "schedule_policy": policy,
                         **opts}, reqs)
    return [t["admitted"][0] for t in ticks(rep) if t["admitted"]]


def test_lof_serves_longest_output_first(tmp_path: Path) -> None:
    """schedule_policy.py: lof sorts the waiting queue by -max_new_tokens."""
    reqs = [req("a", 10, 3), req("b", 10, 9), req("c", 10, 5)]
    assert _order(tmp_path, "lof", reqs) == ["b", "c", "a"]
    assert _order(tmp_path, "fcfs", reqs) == ["a", "b", "c"]


def test_lpm_serves_longest_cached_prefix_first(tmp_path: Path) -> None:
    """schedule_policy.py: lpm sorts by -len(prefix_indices) after matching
    every waiting request against the radix tree."""
    reqs = [req("warm", 64, 1, prefix_blocks=(1, 2, 3, 4)),
            req("x", 64, 1, tick=1, prefix_blocks=(7, 8, 9, 10)),
            req("y", 64, 1, tick=1, prefix_blocks=(1, 2, 5, 6)),
            req("z", 64, 1, tick=1, prefix_blocks=(1, 2, 3, 11))]
    assert _order(tmp_path, "lpm", reqs) == ["warm", "z", "y", "x"]
    assert _order(tmp_path, "fcfs", reqs) == ["warm", "x", "y", "z"]


def test_lpm_ranks_a_fully_cached_prompt_by_its_capped_match(tmp_path: Path) -> None:
    """schedule_policy.py _sort_by_longest_prefix ranks by num_matched_prefix_tokens,
    which match_kv_cache caps at len - 1 (mem_cache/common.py:261): a fully cached
    duplicate (50 matched, 49 counted) ties with a longer prompt matching 49, and
    the queue order decides (issue 39: seed 38219 diverged here)."""
    ids = tuple(range(50))
    reqs = [req("warm", 50, 1, prompt_token_ids=ids),
            req("long", 70, 1, tick=3, prompt_token_ids=ids[:49] + tuple(range(900, 921))),
            req("dup", 50, 1, tick=3, prompt_token_ids=ids)]
    assert _order(tmp_path, "lpm", reqs) == ["warm", "long", "dup"]
    # one matched token more and the longer prompt is ahead on its own
    reqs[1] = req("long", 70, 1, tick=3, prompt_token_ids=ids + tuple(range(900, 920)))
    reqs[1], reqs[2] = reqs[2], reqs[1]
    assert _order(tmp_path, "lpm", reqs) == ["warm", "long", "dup"]


def test_dfs_weight_groups_requests_of_the_heaviest_subtree(tmp_path: Path) -> None:
    """schedule_policy.py _sort_by_dfs_weight: depth-first over the tree,
    children with more waiting requests first."""
    reqs = [req("w1", 32, 1, prefix_blocks=(1, 2)), req("w2", 32, 1, prefix_blocks=(5, 6)),
            req("a", 48, 1, tick=2, prefix_blocks=(1, 2, 3)), req("b", 48, 1, tick=2, prefix_blocks=(5, 6, 3)),
            req("c", 48, 1, tick=2, prefix_blocks=(5, 6, 4)), req("d", 48, 1, tick=2, prefix_blocks=(5, 6, 7))]
    # (5, 6) holds 3 waiting requests, then 2, then ties with (1, 2) (first child wins the tie)
    assert _order(tmp_path, "dfs-weight", reqs)[2:] == ["b", "c", "a", "d"]
    assert _order(tmp_path, "fcfs", reqs)[2:] == ["a", "b", "c", "d"]


def test_random_policy_is_seeded(tmp_path: Path) -> None:
    reqs = [req(f"r{i}", 10, 1) for i in range(8)]
    one = _order(tmp_path, "random", reqs, random_seed=1)
    assert one == _order(tmp_path, "random", reqs, random_seed=1)
    assert sorted(one) == [f"r{i}" for i in range(8)]
    assert one != _order(tmp_path, "random", reqs, random_seed=2)


def test_bad_geometry_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="multiple of page_size"):
        run(tmp_path, {"max_total_tokens": 1000, "page_size": 32, "prefix_block_size": 16}, [req("a", 1, 1)])
    with pytest.raises(InputError, match="minimum"):
        run(tmp_path, {"max_total_tokens": 0}, [req("a", 1, 1)])


def test_presets_replay_the_fixtures_with_latency(tmp_path: Path) -> None:
    for preset in sorted((REPO / "policies").glob("sglang-*.yaml")):
        for workload in ("workload.json", "scenarios/shared-prefix.json", "scenarios/kv-pressure.json"):
            wl = read_workload(REPO / "fixtures" / workload)
            rep = replay(wl.requests, load_policy(preset))
            assert rep["summary"]["completed_requests"] == rep["summary"]["request_count"], (preset, workload)
            assert rep["latency"]["ttft_ms"]["p95"] > 0
            assert rep["summary"]["final_kv_pages"] == 0


def test_presets_replay_an_azure_code_sample(tmp_path: Path) -> None:
    if not AZURE.exists():
        pytest.skip("Azure code trace not copied into fixtures/realdata")
    for preset in sorted((REPO / "policies").glob("sglang-*.yaml")):
        stream, _ = open_requests(AZURE, "azure", limit=150)
        rep = replay(stream, load_policy(preset))
        assert rep["summary"]["request_count"] == 150
        assert rep["summary"]["completed_requests"] + rep["requests"]["rejected"] == 150
        lat = rep["latency"]
        assert lat["e2e_ms"]["p99"] >= lat["ttft_ms"]["p99"] > 0 and lat["tpot_ms"]["p50"] > 0


def test_output_is_identical_across_hash_seeds(tmp_path: Path) -> None:
    prints = set()
    for seed in ("0", "1"):
        out = tmp_path / f"r{seed}.json"
        subprocess.run([sys.executable, "-m", "tickgate", "replay", "--quiet", "--input",
                        str(REPO / "fixtures/scenarios/shared-prefix.json"), "--policy",
                        str(REPO / "policies/sglang-lpm.yaml"), "--output", str(out)],
                       check=True, env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}, cwd=REPO)
        prints.add(out.read_bytes())
    assert len(prints) == 1
    assert json.loads(prints.pop())["scheduler"]["prefix_hit_tokens"] > 0
