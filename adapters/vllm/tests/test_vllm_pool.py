"""The vllm-v1 block pool against a naive model of the same free queue.

The pool keeps reference counts implicit (``shared`` for blocks held twice or
more, ``qpos`` for where a free cached block sits) and works on runs of blocks
at C level; :class:`NaivePool` keeps an explicit count per block and a plain
list for the queue. Random request lifecycles (prefix hits, allocation with
eviction, registration with repeated and already-cached keys, release with
shared blocks) must give the same blocks, counts and lookups in both.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate_vllm.v1.pool import BlockPool


class NaivePool:
    """vLLM's free queue as the pool documents it: anonymous free blocks first
    (fresh ids), then cached free blocks, least recently freed first."""

    def __init__(self, usable: int) -> None:
        self.usable = usable
        self.anon_free = usable
        self.next_id = 1
        self.queue: list[int] = []
        self.ref: dict[int, int] = {}
        self.key_of: dict[int, int] = {}
        self.cache: dict[int, list[int]] = {}

    @property
    def free(self) -> int:
        return self.anon_free + len(self.queue)

    def allocate(self, n: int) -> list[int]:
        out = []
        while n and self.anon_free:
            out.append(self.next_id)
            self.next_id += 1
            self.anon_free -= 1
            n -= 1
        for _ in range(n):
            b = self.queue.pop(0)
            key = self.key_of.pop(b, None)  # None: freed as cached, without a key
            if key is not None:
                self.cache[key].remove(b)
                if not self.cache[key]:
                    del self.cache[key]
            out.append(b)
        for b in out:
            self.ref[b] = 1
        return out

    def lookup(self, keys: list[int], limit: int) -> list[int]:
        out = []
        for k in keys[:limit]:
            if k not in self.cache:
                break
            out.append(self.cache[k][0])
        return out

    def evictable(self, blocks: list[int]) -> int:
        return sum(1 for b in blocks if self.ref[b] == 0)

    def touch(self, blocks: list[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                self.queue.remove(b)
            self.ref[b] += 1

    def insert(self, b: int, key: int) -> None:
        self.key_of[b] = key
        self.cache.setdefault(key, []).append(b)

    def release(self, blocks: list[int], ncached: int) -> None:
        for j in range(len(blocks) - 1, -1, -1):
            b = blocks[j]
            self.ref[b] -= 1
            if self.ref[b]:
                continue
            if j < ncached:
                self.queue.append(b)
            else:
                del self.ref[b]
                self.anon_free += 1


# a request: its prompt blocks' contents (a small alphabet, so prefixes are
# shared), how many blocks beyond them it allocates (unhashed tail), whether
# the oldest live request finishes first, and how many of its tail blocks it
# frees as cached blocks without a key (a finished request's own blocks)
requests = st.lists(
    st.tuples(st.lists(st.integers(0, 3), min_size=0, max_size=12), st.integers(0, 4), st.booleans(),
              st.integers(0, 4)),
    min_size=1, max_size=60,
)


def chained(contents: list[int]) -> list[tuple[int, ...]]:
    """Keys as vLLM chains them: block i's key stands for the whole prefix."""
    return [tuple(contents[:i + 1]) for i in range(len(contents))]


@settings(max_examples=300, deadline=None)
@given(requests, st.integers(4, 40), st.sampled_from([0, 5, 10**9]))
def test_pool_matches_the_naive_free_queue(reqs, usable, scans):
    """``scans``: hit lookups answered by scanning the queue before positions
    are kept (0: positions from the first hit; 10**9: never)."""
    pool = BlockPool(usable + 1, caching=True)
    pool.scans_left = scans
    model = NaivePool(usable)
    live: list[tuple[list[int], int, list[Any]]] = []  # (blocks, blocks freed as cached, their keys)
    for contents, tail, release_oldest, keyless in reqs:
        keys = chained(contents)
        if release_oldest and live:
            blocks, ncached, k = live.pop(0)
            pool.release(blocks, ncached, k)
            model.release(blocks, ncached)
            assert pool.free == model.free
        hits = pool.lookup(keys, len(keys), lambda i: ("own", i))
        assert hits == model.lookup(keys, len(keys))
        h = len(hits)
        need = len(keys) - h + tail
        if need + pool.evictable(hits) > pool.free:
            continue  # would not fit: the scheduler leaves it waiting
        assert pool.evictable(hits) == model.evictable(hits)
        pool.touch(hits)
        model.touch(hits)
        blocks = list(hits)
        pool.allocate(need, blocks)
        assert blocks[h:] == model.allocate(need)
        pool.insert_run(blocks[h:len(keys)], keys[h:])
        for b, k in zip(blocks[h:len(keys)], keys[h:]):
            model.insert(b, k)
        keyless = min(keyless, tail)
        live.append((blocks, len(keys) + keyless, keys + [None] * keyless))
        assert pool.free == model.free
        assert pool.used == usable - model.free
    for blocks, ncached, k in live:
        pool.release(blocks, ncached, k)
        model.release(blocks, ncached)
    assert pool.free == model.free == usable
    # the same cache: keyless blocks left no entry behind
    assert {k: [v] if type(v) is int else v for k, v in pool.cache.items()} == model.cache
    assert not pool.shared and pool.extra == 0


@pytest.mark.parametrize("scans", [0, 10**9])
def test_a_hit_finds_a_free_block_after_the_queue_was_compacted(scans):
    pool = BlockPool(64, caching=True)
    pool.scans_left = scans
    key = 0
    # cycle enough cached blocks through the queue that its head passes 4096
    # and the list is compacted under the recorded positions
    for _ in range(200):
        blocks: list[int] = []
        pool.allocate(40, blocks)
        keys = list(range(key, key + 40))
        key += 40
        pool.insert_run(blocks, keys)
        pool.release(blocks, 40, keys)
    assert pool.lbase > 0
    assert pool.qpos is None  # no hit yet: no positions kept
    last = keys
    hits = pool.lookup(last, 40, lambda i: ("own", i))
    assert len(hits) == 40 and pool.evictable(hits) == 40
    free = pool.free
    pool.touch(hits)
    assert pool.free == free - 40 and pool.evictable(hits) == 0
    fresh: list[int] = []
    pool.allocate(pool.free, fresh)  # takes every other block, skipping the tombstones
    assert not set(fresh) & set(hits)
    assert (pool.qpos is None) == (scans > 0)
    assert len(pool.qpos or ()) <= 2 * pool.usable + 4096


def test_a_block_listed_twice_is_released_once_per_listing():
    pool, model = BlockPool(9, caching=True), NaivePool(8)
    first: list[int] = []
    pool.allocate(1, first)
    model.allocate(1)
    pool.insert_run(first, [7])
    model.insert(first[0], 7)
    # a second request whose chain repeats the key (a collision) hits the block twice
    hits = pool.lookup([7, 7], 2, lambda i: ("own", i))
    assert hits == model.lookup([7, 7], 2) == [first[0], first[0]]
    pool.touch(hits)
    model.touch(hits)
    pool.release(hits, 2, [7, 7])
    model.release(hits, 2)
    pool.release(first, 1, [7])
    model.release(first, 1)
    assert pool.free == model.free == 8 and not pool.shared and pool.extra == 0


def test_a_repeated_key_inside_a_run_is_kept_as_insert_would():
    run, single = BlockPool(16, caching=True), BlockPool(16, caching=True)
    for pool in (run, single):
        blocks: list[int] = []
        pool.allocate(4, blocks)
    run.insert_run([1, 2, 3, 4], [10, 11, 10, 12])
    for b, k in zip([1, 2, 3, 4], [10, 11, 10, 12]):
        single.insert(b, k)
    assert run.cache == single.cache == {10: [1, 3], 11: 2, 12: 4}
    assert run.nlists == single.nlists == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=10), st.lists(st.integers(0, 2), max_size=10),
       st.sampled_from([(16, 16), (16, 64), (16, 512), (64, 16), (32, 16)]), st.integers(0, 40))
def test_prompt_keys_are_equal_exactly_when_the_prefixes_are(a, b, sizes, extra_tokens):
    """Whatever the workload's block size, block i of two prompts gets the same
    key exactly when the two prompts agree on every token up to that block."""
    from tickgate.interfaces.model import Request
    from tickgate_vllm.v1.scheduler import prompt_block_keys

    bs, wbs = sizes

    def keys_and_tokens(ids):
        prompt = max(1, len(ids) * wbs - extra_tokens) if ids else 1
        r = Request(id="r", prompt_tokens=prompt, max_output_tokens=1, prefix_blocks=tuple(ids))
        tokens = [i for i in ids for _ in range(wbs)][:prompt]
        return prompt_block_keys(r, bs, wbs), tokens

    ka, ta = keys_and_tokens(a)
    kb, tb = keys_and_tokens(b)
    assert len(ka) <= len(ta) // bs and len(kb) <= len(tb) // bs
    for i in range(min(len(ka), len(kb))):
        assert (ka[i] == kb[i]) == (ta[:(i + 1) * bs] == tb[:(i + 1) * bs]), i
    assert len(set(ka)) == len(ka)
