"""Unit tests of the SGLang radix cache mirror (tickgate_sglang.radix_cache).

Behaviours follow SGLang's python/sglang/srt/mem_cache/radix_cache.py.
"""

from __future__ import annotations

import pytest

from tickgate_sglang.radix_cache import RadixCache


def test_insert_then_match_prefix_counts_tokens_by_unit_weight() -> None:
    tree = RadixCache()
    present, node = tree.insert((1, 2, 3, 4), 16)
    assert present == 0
    assert tree.total_size == 64 and tree.evictable_size == 64
    tokens, last = tree.match_prefix((1, 2, 3, 9), 16)
    assert tokens == 48
    assert tree.depth_tokens(last) == 48
    # a second insert of the same key finds it all present and adds nothing
    present, again = tree.insert((1, 2, 3, 4), 16)
    assert present == 64 and again is node and tree.total_size == 64


def test_match_splits_an_edge_where_the_match_ends() -> None:
    """SGLang's _match_prefix_helper splits a node when the key diverges inside it."""
    tree = RadixCache()
    tree.insert((1, 2, 3, 4), 1)
    assert tree.node_count() == 1
    tokens, node = tree.match_prefix((1, 2), 1)
    assert tokens == 2 and tree.node_count() == 2
    assert list(node.children) == [3]


def test_token_pages_and_block_ids_never_share_a_node() -> None:
    tree = RadixCache()
    tree.insert(((1, 2),), 2)
    tokens, _ = tree.match_prefix((1,), 16)
    assert tokens == 0


def test_lock_ref_protects_the_whole_path_and_unlock_returns_it() -> None:
    """inc_lock_ref/dec_lock_ref move a path between evictable and protected size."""
    tree = RadixCache()
    _, a = tree.insert((1, 2), 16)
    _, b = tree.insert((1, 2, 3), 16)
    assert tree.inc_lock_ref(b) == 48
    assert tree.evictable_size == 0 and tree.protected_size == 48
    assert tree.evict(1000) == 0  # everything is locked
    assert tree.dec_lock_ref(b) == 48
    assert tree.evictable_size == 48
    with pytest.raises(ValueError):
        tree.dec_lock_ref(b)


def test_lru_eviction_frees_unlocked_leaves_oldest_first_and_parents_become_leaves() -> None:
    """evict() pops leaves by last access time; a parent whose children are all
    gone becomes evictable in turn (radix_cache.py RadixCache.evict)."""
    tree = RadixCache()
    tree.insert((1, 2, 10), 16)   # shared (1, 2) then leaf (10,)
    tree.insert((1, 2, 20), 16)   # leaf (20,)
    _, c = tree.insert((5, 6), 16)
    tree.match_prefix((1, 2, 10), 16)  # touch both family leaves: (5, 6) is now the oldest
    tree.match_prefix((1, 2, 20), 16)
    freed = tree.evict(16)
    assert freed == 32                                  # whole nodes go: (5, 6) is two units
    assert tree.match_prefix((5, 6), 16)[0] == 0
    assert tree.match_prefix((1, 2, 20), 16)[0] == 48   # the recently used leaves survived
    tree.inc_lock_ref(tree.match_prefix((1, 2, 20), 16)[1])
    freed = tree.evict(1000)
    assert freed == 16  # only the unlocked (10,) leaf could go
    assert tree.total_size == 48 and tree.protected_size == 48
    assert c.key == (5, 6)


def test_evict_removes_a_parent_once_its_last_child_is_gone() -> None:
    tree = RadixCache()
    tree.insert((1, 2, 3), 1)
    tree.insert((1, 2, 4), 1)
    assert tree.evict(10) == 4
    assert tree.total_size == 0 and tree.node_count() == 0


def test_common_length_by_strides_is_the_unit_by_unit_one() -> None:
    """_common_len compares a stride at a time (a 512-token block is 512 units at
    page size 1): the same answer as comparing unit by unit, at every cut."""
    from tickgate_sglang.radix_cache import _STRIDE, _common_len

    base = tuple(range(3 * _STRIDE + 7))
    for cut in [0, 1, _STRIDE - 1, _STRIDE, _STRIDE + 1, 2 * _STRIDE, len(base) - 1, len(base)]:
        other = base[:cut] + (-1,) + base[cut + 1:]
        for start in (0, 5):
            key = (None,) * start + other
            naive = next((i for i, (a, b) in enumerate(zip(base, other)) if a != b), min(len(base), len(other)))
            assert _common_len(base, key, start, len(key)) == naive
            assert _common_len(base[:cut], key, start, len(key)) == min(cut, naive)
            assert _common_len(base, key, start, start + 3) == min(3, naive)  # the key's bound, no copy
