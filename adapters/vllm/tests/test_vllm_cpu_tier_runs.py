"""The CPU tier's evictions against a brute-force LRU (v1.cpu_tier): the tier queues evictable chunks by
runs (one heap entry per store, load or finish) and reads a run on while it stays below the others, so
every eviction must still be the evictable, unprotected chunks of lowest rank, lowest first, whatever
mix of shared chunks, re-ranks, pins, protected keys and failed evictions led there."""

from __future__ import annotations

import random

import pytest

from tickgate_vllm.v1.cpu_tier import CpuTier, TierRequest


def _expected(tier: CpuTier, n: int, protected: set[object]) -> list[int] | None:
    """What vLLM's LRU evicts: the ``n`` evictable, unprotected chunks of lowest rank."""
    order = sorted((k for k in tier.evictable if k not in protected), key=tier.ranks.__getitem__)
    if len(order) < n:
        return None
    return [tier.chunks[k][1] for k in order[:n]]


@pytest.mark.parametrize("seed", range(6))
def test_evictions_are_the_lowest_ranked_chunks_whatever_the_runs(seed: int) -> None:
    rng = random.Random(seed)
    tier = CpuTier(rng.choice((8, 24, 64)))
    keys = [f"k{i}" for i in range(90)]  # few keys: requests share and re-rank them often
    live: list[tuple[TierRequest, list[str]]] = []
    loads: list[list[str]] = []
    stores: list[list[str]] = []
    checked = 0
    for _ in range(400):
        op = rng.random()
        if op < 0.45:  # a request stores a run of chunks (an eviction when the tier is full)
            start = rng.randrange(len(keys))
            chunk = keys[start : start + rng.randint(1, 12)]
            ctx = TierRequest({k: 16 * (i + 1) for i, k in enumerate(chunk)})
            protected = set(chunk)
            missing = [k for k in chunk if k not in tier.chunks]
            room = len(tier.free_list) + tier.num_chunks - tier.allocated
            need = len(missing) - room
            allocated = tier.allocated
            expected = _expected(tier, need, protected) if need > 0 else []
            out = tier.prepare_store(chunk, ctx)
            if need > 0:
                checked += 1
                if expected is None:
                    assert out is None
                else:
                    assert out is not None
                    # never used ids come first, then the freed ones, the last freed first
                    fresh = tier.num_chunks - allocated
                    assert out[1][fresh : fresh + need] == expected[::-1]
            if out is not None and out[0]:
                stores.append(out[0])
            live.append((ctx, chunk))
        elif op < 0.6 and stores:
            tier.complete_store(stores.pop(rng.randrange(len(stores))))
        elif op < 0.72:  # a load pins cached, written chunks (a key may be pinned twice)
            hit = [k for k in rng.sample(keys, 6) if k in tier.chunks and tier.chunks[k][0] >= 0]
            if hit:
                tier.prepare_load(hit, TierRequest({k: 16 * (i + 1) for i, k in enumerate(hit)}))
                loads.append(hit)
        elif op < 0.84 and loads:
            tier.complete_load(loads.pop(rng.randrange(len(loads))))
        elif live:
            tier.request_finished(live.pop(rng.randrange(len(live)))[0])
        evictable = {k for k, c in tier.chunks.items() if c[0] == 0}
        assert tier.evictable == evictable and tier.num_evictable == len(evictable)
    assert checked > 20
