"""KV cache block reuse in the ``trtllm`` mirror (``enable_block_reuse``).

Each test encodes one behaviour of TensorRT-LLM's block manager and names its
source (``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``,
``evictionPolicy.cpp``, ``capacityScheduler.cpp``, ``llmRequest.h``).
Prefix blocks here are workload ids of one KV block each (16 tokens).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tickgate import Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests

from trtllm_helpers import outcome, run

REPO = Path(__file__).resolve().parents[3]
MOONCAKE = REPO / "fixtures" / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
TIMING = {"name": "linear", "options": {"fixed_ms": 5.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.1,
                                        "per_context_token_ms": 0.0005}}


def preq(rid: str, prompt: int, out: int, ids: tuple[int, ...] | None, tick: int = 0) -> Request:
    return Request(id=rid, prompt_tokens=prompt, max_output_tokens=out, arrival_tick=tick, prefix_blocks=ids)


def opts(**kw: Any) -> dict[str, Any]:
    return {"tokens_per_block": 16, "kv_cache_blocks": 100, "max_num_tokens": 1000, **kw}


def hits(rep: dict[str, Any]) -> dict[str, int]:
    return {o["id"]: o.get("prefix_hit_tokens", 0) for o in rep["outcomes"]}


def prefill(rep: dict[str, Any], rid: str) -> int:
    return sum(t["detail"].get("context_chunks", {}).get(rid, 0) for t in rep["ticks"])


def test_a_shared_prompt_is_found_again_up_to_its_last_token(tmp_path: Path) -> None:
    """addSequence matches the blocks over the prompt's first ``len - 1`` tokens
    (the last token is computed); the last block, holding 15 of the 16 tokens
    of a stored full block, is reused partly (enable_partial_reuse, on by
    default); LlmRequest::setPrepopulatedPromptLen moves the context past the
    tokens found, so the step computes only the last one."""
    reqs = [preq("a", 64, 2, (1, 2, 3, 4)), preq("b", 64, 2, (1, 2, 3, 4), tick=10)]
    rep = run(tmp_path, opts(), reqs)
    assert hits(rep) == {"a": 0, "b": 63}
    assert prefill(rep, "a") == 64 and prefill(rep, "b") == 1
    br = rep["scheduler"]["block_reuse"]
    assert br["prefix_hit_tokens"] == 63 and br["reused_blocks"] == 4 and br["prompt_tokens"] == 128
    # only exact blocks without partial reuse: three full blocks
    rep = run(tmp_path, opts(enable_partial_reuse=False), reqs)
    assert hits(rep)["b"] == 48 and prefill(rep, "b") == 16
    # reuse off: nothing found, and the report has no block_reuse section
    rep = run(tmp_path, opts(enable_block_reuse=False), reqs)
    assert hits(rep) == {"a": 0, "b": 0} and prefill(rep, "b") == 64
    assert "block_reuse" not in rep["scheduler"]


def test_only_the_shared_leading_blocks_match(tmp_path: Path) -> None:
    """The radix tree is walked from the root: matching stops at the first
    block whose key differs, even if later ids are equal (BlockKey chains)."""
    reqs = [preq("a", 64, 2, (1, 2, 3, 4)), preq("b", 80, 2, (1, 2, 9, 4, 5), tick=10)]
    assert hits(run(tmp_path, opts(), reqs))["b"] == 32


def test_reuse_off_and_no_prefixes_replay_as_without_reuse(tmp_path: Path) -> None:
    """enable_block_reuse false, or a workload without prefix information,
    gives the replay the mirror gives without block reuse."""
    with_ids = [preq(f"r{i}", 40 + 16 * (i % 3), 5 + i % 4, (7, 8, 9, i), tick=i) for i in range(12)]
    bare = [preq(r.id, r.prompt_tokens, r.max_output_tokens, None, r.arrival_tick) for r in with_ids]
    for policy in ("GUARANTEED_NO_EVICT", "MAX_UTILIZATION"):
        o = opts(kv_cache_blocks=20, capacity_scheduler_policy=policy)
        off = run(tmp_path, {**o, "enable_block_reuse": False}, with_ids)
        plain = run(tmp_path, o, bare)
        on = run(tmp_path, o, with_ids)
        assert off["summary"]["trace_fingerprint"] == plain["summary"]["trace_fingerprint"]
        assert on["summary"]["trace_fingerprint"] != plain["summary"]["trace_fingerprint"]
        assert "block_reuse" not in plain["scheduler"]


def test_shared_blocks_are_not_taken_from_the_free_pool(tmp_path: Path) -> None:
    """Blocks found held by another request are shared (KVCacheBlock
    incRefCount), so the pool loses only the new ones; the capacity scheduler
    still counts the whole prompt (getRemainingBlocksToCompletion ignores reuse)."""
    reqs = [preq("a", 64, 40, (1, 2, 3, 4)), preq("b", 64, 5, (1, 2, 3, 4), tick=3)]
    on = run(tmp_path, opts(), reqs)
    off = run(tmp_path, opts(enable_block_reuse=False), reqs)
    t_on, t_off = on["ticks"][3], off["ticks"][3]
    assert t_on["admitted"] == ["b"] and t_off["admitted"] == ["b"]
    # b's 4 prompt blocks: 3 shared with a, the partly matched 4th copied into a new block
    assert t_off["kv_pages_reserved"] == 4 and t_on["kv_pages_reserved"] == 1
    assert t_on["kv_pages_used"] == t_off["kv_pages_used"] - 3
    # a request the capacity scheduler holds back stays held back: GUARANTEED_NO_EVICT reserves
    # b's blocks to completion in full (10 blocks for a, 5 for b: 14 blocks hold only one)
    tight = [preq("a", 64, 96, (1, 2, 3, 4)), preq("b", 64, 10, (1, 2, 3, 4), tick=3)]
    rep = run(tmp_path, opts(kv_cache_blocks=14), tight)
    assert outcome(rep, "b")["admitted_tick"] > outcome(rep, "a")["finished_tick"]
    assert hits(rep)["b"] == 63


def test_copy_on_partial_reuse_off_skips_a_partly_matching_block_in_use(tmp_path: Path) -> None:
    """findMatchingBlock: without copy_on_partial_reuse a partly matching block
    is a candidate only if nobody references it and it is a leaf."""
    reqs = [preq("a", 64, 40, (1, 2, 3, 4)), preq("b", 64, 5, (1, 2, 3, 4), tick=3)]
    assert hits(run(tmp_path, opts(), reqs))["b"] == 63  # a still holds its last block: copied
    assert hits(run(tmp_path, opts(copy_on_partial_reuse=False), reqs))["b"] == 48
    # after a has finished, its last prompt block still has a's generated blocks below it (not a leaf)
    later = [reqs[0], preq("b", 64, 5, (1, 2, 3, 4), tick=60)]
    assert hits(run(tmp_path, opts(copy_on_partial_reuse=False), later))["b"] == 48
    # a request that generated nothing past its prompt leaves a free leaf: taken over without a copy
    later = [preq("a", 64, 1, (1, 2, 3, 4)), preq("b", 64, 5, (1, 2, 3, 4), tick=5)]
    rep = run(tmp_path, opts(copy_on_partial_reuse=False), later)
    admit = next(t for t in rep["ticks"] if t["admitted"] == ["b"])
    assert hits(rep)["b"] == 63 and admit["kv_pages_reserved"] == 4


def test_free_reusable_blocks_are_evicted_least_recently_released_first(tmp_path: Path) -> None:
    """LRUEvictionPolicy: released blocks join the back of the free queue, new
    blocks come from the front, and a block taken that way loses its cached
    content (getFreeBlock → freeChildren). Never-used blocks go first."""
    x, y = (1, 2, 3, 4), (5, 6, 7, 8)
    reqs = [preq("a", 64, 1, x), preq("c", 64, 1, y, tick=5),
            preq("d", 128, 1, None, tick=10),  # 8 new blocks: the 4 never used, then a's
            preq("f", 64, 1, y, tick=15), preq("e", 64, 1, x, tick=20)]
    rep = run(tmp_path, opts(kv_cache_blocks=12), reqs)
    h = hits(rep)
    assert (h["e"], h["f"]) == (0, 63)
    assert rep["scheduler"]["block_reuse"]["evicted_blocks"] >= 4
    # a larger pool keeps both
    h = hits(run(tmp_path, opts(kv_cache_blocks=40), reqs))
    assert (h["e"], h["f"]) == (63, 63)


def test_a_context_waits_for_the_blocks_an_earlier_context_is_computing(tmp_path: Path) -> None:
    """capacityScheduler.cpp beneficialToSkip: a new context whose first block
    missing from the tree is also the first new block of a context scheduled
    before it in the walk is left for a later step, then reuses those blocks."""
    reqs = [preq("a", 64, 3, (1, 2, 3, 4)), preq("b", 64, 3, (1, 2, 3, 4))]
    rep = run(tmp_path, opts(), reqs)
    assert rep["ticks"][0]["admitted"] == ["a"]
    assert outcome(rep, "b")["admitted_tick"] == 1 and hits(rep)["b"] == 63
    assert rep["scheduler"]["block_reuse"]["skipped_for_reuse"] == 1
    # different prompts are not held back
    rep = run(tmp_path, opts(), [reqs[0], preq("b", 64, 3, (5, 6, 7, 8))])
    assert rep["ticks"][0]["admitted"] == ["a", "b"]
    # STATIC_BATCH does not skip
    rep = run(tmp_path, opts(capacity_scheduler_policy="STATIC_BATCH"), reqs)
    assert rep["ticks"][0]["admitted"] == ["a", "b"] and hits(rep)["b"] == 0


def test_chunked_context_ends_on_a_block_boundary_after_the_tokens_found(tmp_path: Path) -> None:
    """setPrepopulatedPromptLen: with a chunk that is not the last, the
    context position moves past the tokens found and the chunk is cut to end
    at a block boundary (found + chunk, rounded down)."""
    ids = tuple(range(1, 9))
    reqs = [preq("a", 128, 2, ids), preq("b", 128, 2, ids, tick=10)]
    o = opts(max_num_tokens=40, enable_chunked_context=True)
    rep = run(tmp_path, o, reqs)
    chunks = [t["detail"]["context_chunks"]["b"] for t in rep["ticks"] if "b" in t["detail"].get("context_chunks", {})]
    assert hits(rep)["b"] == 127 and chunks == [1]
    # a shorter match: 2 blocks found, the chunk of 32 (40 rounded down) ends at 64
    reqs = [preq("a", 128, 2, ids), preq("b", 128, 2, (1, 2, 50, 51, 52, 53, 54, 55), tick=10)]
    rep = run(tmp_path, o, reqs)
    chunks = [t["detail"]["context_chunks"]["b"] for t in rep["ticks"] if "b" in t["detail"].get("context_chunks", {})]
    assert hits(rep)["b"] == 32 and chunks[0] == 32 and sum(chunks) == 96


def test_a_paused_request_finds_its_own_blocks_again(tmp_path: Path) -> None:
    """MAX_UTILIZATION pauses through removeSequence, which stores the
    sequence's blocks for reuse (releaseBlocks → storeBlocksForReuse); the
    re-run context over prompt plus generated tokens finds them unless they
    were evicted. Those tokens count in reused_tokens, not in the request's
    first-admission prefix_hit_tokens."""
    reqs = [preq(r, 32, 60, (10 * i + 1, 10 * i + 2)) for i, r in enumerate("abc")]
    o = opts(kv_cache_blocks=9, capacity_scheduler_policy="MAX_UTILIZATION")
    rep = run(tmp_path, o, reqs)
    br = rep["scheduler"]["block_reuse"]
    assert rep["scheduler"]["pauses"] >= 1
    assert br["prefix_hit_tokens"] == 0 and br["reused_tokens"] > 0
    assert rep["summary"]["completed_requests"] == 3 and rep["summary"]["final_kv_pages"] == 0
    off = run(tmp_path, {**o, "enable_block_reuse": False}, reqs)
    assert sum(t["prefill_tokens"] for t in rep["ticks"]) < sum(t["prefill_tokens"] for t in off["ticks"])


def test_token_ids_match_token_by_token(tmp_path: Path) -> None:
    """With prompt token ids the last partly matching block reuses exactly the
    leading tokens it shares (KVCacheBlock::findMatchingBlock, partialMatch)."""
    a = tuple(range(100, 164))
    b = a[:40] + tuple(range(900, 924))
    reqs = [Request(id="a", prompt_tokens=64, max_output_tokens=2, prompt_token_ids=a),
            Request(id="b", prompt_tokens=64, max_output_tokens=2, arrival_tick=10, prompt_token_ids=b)]
    assert hits(run(tmp_path, opts(), reqs))["b"] == 40


def _mooncake(n: int) -> tuple[list[Request], int]:
    stream, inputs = open_requests(MOONCAKE, "mooncake", limit=n)
    return list(stream), inputs["block_size"]


def run_mc(tmp_path: Path, options: dict[str, Any], reqs: list[Request], block_size: int) -> dict[str, Any]:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"version": 1, "scheduler": {"name": "trtllm", "options": options},
                                "timing": TIMING}))
    return replay(reqs, load_policy(path), prefix_block_size=block_size, detail_limit=10**7)


def _mc_options(**kw: Any) -> dict[str, Any]:
    return {"tokens_per_block": 32, "kv_cache_blocks": 3000, "max_batch_size": 64, "max_num_tokens": 8192,
            "enable_chunked_context": True, **kw}


def test_mooncake_slice_hits_and_computes_fewer_context_tokens(tmp_path: Path) -> None:
    """The Mooncake conversation trace's hash_ids (512 tokens each) are found
    again: prompt tokens = context tokens computed + tokens found."""
    reqs, bs = _mooncake(150)
    assert bs == 512
    for policy in ("GUARANTEED_NO_EVICT", "MAX_UTILIZATION"):
        rep = run_mc(tmp_path, _mc_options(capacity_scheduler_policy=policy), reqs, bs)
        off = run_mc(tmp_path, _mc_options(capacity_scheduler_policy=policy, enable_block_reuse=False), reqs, bs)
        br = rep["scheduler"]["block_reuse"]
        assert br["prefix_hit_tokens"] > 0 and br["prefix_hit_tokens"] % 512 == 0
        assert "ticks_omitted" not in rep
        computed = sum(t["prefill_tokens"] for t in rep["ticks"] for _ in range(t["span"]))
        off_computed = sum(t["prefill_tokens"] for t in off["ticks"] for _ in range(t["span"]))
        if policy == "GUARANTEED_NO_EVICT":  # no pauses: every prompt token is computed or found once
            assert rep["scheduler"]["pauses"] == off["scheduler"]["pauses"] == 0
            assert computed + br["reused_tokens"] == off_computed
        assert computed < off_computed
        assert sum(hits(rep).values()) == br["prefix_hit_tokens"]
        assert rep["summary"]["final_kv_pages"] == 0


def test_block_reuse_is_deterministic_across_hash_seeds(tmp_path: Path) -> None:
    """Keys are hashes of int tuples and the tree keeps insertion order: two
    processes with different PYTHONHASHSEED agree on the replay."""
    lines = MOONCAKE.read_text().splitlines()[:80]
    trace = tmp_path / "mc.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"version": 1, "scheduler": {"name": "trtllm", "options": _mc_options(
        capacity_scheduler_policy="MAX_UTILIZATION", kv_cache_blocks=1200)}, "timing": TIMING}))
    prints = []
    for seed in ("1", "2"):
        out = tmp_path / f"r{seed}.json"
        subprocess.run([sys.executable, "-m", "tickgate", "replay", "--input", str(trace), "--input-format",
                        "mooncake", "--policy", str(policy), "--output", str(out)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True)
        rep = json.loads(out.read_text())
        prints.append((rep["summary"]["trace_fingerprint"], rep["scheduler"]["block_reuse"]))
    assert prints[0] == prints[1] and prints[0][1]["prefix_hit_tokens"] > 0
