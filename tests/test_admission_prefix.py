"""The prefix-cache KV allocator and the lpm policy on top of it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.kv.prefix_cache import PrefixCacheAllocator

from admission_helpers import POLICIES, policy_text, run


def test_hits_share_pages_and_skip_prefill_capped_at_prompt_minus_one() -> None:
    kv = PrefixCacheAllocator(capacity=10, page_size=4)
    blocks = (1, 2, 3)  # 12 tokens of prefix, block size = page size
    assert kv.plan_prefix(blocks, 12, 4) == (0, 4)
    assert kv.reserve_prefix("a", 4, blocks, 12) == 0
    assert kv.used == 4
    # all three prompt pages are cached, but the last prompt token is always computed
    assert kv.plan_prefix(blocks, 12, 4) == (8, 2)
    assert kv.reserve_prefix("b", 4, blocks, 12) == 8
    assert kv.used == 6  # two shared pages counted once
    kv.free("a")
    kv.free("b")
    assert kv.used == 0 and kv.summary()["cached_pages"] == 3
    # unreferenced cached pages are free for accounting; a hit on them still costs the pages
    assert kv.plan_prefix(blocks, 13, 4) == (12, 4)
    assert kv.summary()["prefix_hit_tokens"] == 8 and kv.summary()["prefix_query_tokens"] == 24


def test_chained_keys_differ_after_a_divergent_block_and_span_block_sizes() -> None:
    kv = PrefixCacheAllocator(capacity=10, page_size=8, block_size=4)
    a = kv.page_keys((1, 2, 3, 4), 16)
    assert len(a) == 2
    assert kv.page_keys((1, 2, 9, 4), 16)[0] == a[0]
    assert kv.page_keys((1, 2, 9, 4), 16)[1] != a[1]
    assert kv.page_keys((1, 9, 3, 4), 16)[1] != a[1]  # page 2 depends on everything before it
    assert kv.page_keys((1, 2, 3), 16) == a[:1]  # only full pages are keyed


def test_lru_evicts_tail_pages_of_the_least_recent_owner_first() -> None:
    kv = PrefixCacheAllocator(capacity=4, page_size=1)
    kv.reserve_prefix("x", 2, (1, 2), 3)
    kv.reserve_prefix("y", 2, (7, 8), 3)
    kv.free("x")
    kv.free("y")
    kv.reserve("z", 1)  # evicts x's tail page first
    assert kv.match_prefix((1, 2)) == 1 and kv.match_prefix((7, 8)) == 2
    assert kv.summary()["evicted_pages"] == 1


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(1, 4), st.booleans()),
                min_size=1, max_size=40))
def test_capacity_never_exceeded_and_every_page_comes_back(ops: list[tuple[int, int, int, bool]]) -> None:
    kv = PrefixCacheAllocator(capacity=12, page_size=2)
    live: list[str] = []
    for i, (group, length, pages_extra, release) in enumerate(ops):
        if release and live:
            kv.free(live.pop(0))
        blocks = tuple(group * 100 + b for b in range(length))
        prompt = 2 * length + 1
        pages = -(-prompt // 2) + pages_extra
        hit, cost = kv.plan_prefix(blocks, prompt, pages)
        assert 0 <= hit < prompt and 0 <= cost <= pages
        if cost <= kv.free_pages:
            before = kv.used
            assert kv.reserve_prefix(f"r{i}", pages, blocks, prompt) == hit
            assert kv.used == before + cost
            live.append(f"r{i}")
        assert kv.used <= kv.capacity
        assert kv.private + len(kv.refs) <= kv.capacity
    for owner in live:
        kv.free(owner)
    assert kv.used == 0 and not kv.owners


def test_lpm_raises_the_prefix_hit_rate() -> None:
    lpm = run("lpm", POLICIES / "lpm.yaml")
    fcfs_text = policy_text("lpm", **{"  name: lpm\n  options:\n    max_scan: 128\n": "  name: priority-fcfs\n"})
    fcfs = run("lpm", fcfs_text, Path(__import__("tempfile").mkdtemp()))
    hit, base = lpm["scheduler"]["kv_cache"], fcfs["scheduler"]["kv_cache"]
    assert hit["prefix_hit_rate"] > base["prefix_hit_rate"] + 0.3
    assert lpm["utilization"]["prefill_tokens"] < fcfs["utilization"]["prefill_tokens"]
    assert sum(o.get("prefix_hit_tokens", 0) for o in lpm["outcomes"]) == hit["prefix_hit_tokens"]
    assert lpm["summary"]["final_kv_pages"] == 0
    assert lpm["requests"]["completed"] == lpm["summary"]["request_count"]


def test_lpm_falls_back_to_fcfs_past_max_scan(tmp_path: Path) -> None:
    text = policy_text("lpm", **{"max_scan: 128": "max_scan: 1"})
    report = run("lpm", text, tmp_path)
    assert report["scheduler"]["admission"]["fcfs_walks"] > 0
