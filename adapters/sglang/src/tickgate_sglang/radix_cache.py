"""A radix tree of cached KV content with lock references and LRU eviction.

Mirrors the tree SGLang 0.5.23 builds by default, ``UnifiedRadixCache`` with its
full-attention component (``python/sglang/srt/mem_cache/unified_radix_cache.py``,
``unified_cache/unified_tree_core.py``; the legacy ``radix_cache.py`` has the same
rules): ``match_prefix`` walks the tree and splits an edge where a match ends
inside it (``_match_prefix_helper``, ``_split_node``), the matched path becoming
the most recently used; ``insert`` adds what is missing and reports how much was
already there (``_insert_walk_step``, ``_add_new_node``); ``inc_lock_ref`` /
``dec_lock_ref`` protect the path of a running request (a locked node is not
evictable); ``evict`` frees unlocked leaves, least recently used first, whole
nodes, and a parent whose last child went becomes a leaf (``evict_for_alloc``).

Differences from SGLang, on purpose:

* Keys are tuples of *units*, one per page of ``weight`` tokens: a page of
  token ids (a ``tuple`` of ``page_size`` ids) or a page of a workload prefix
  block (an ``int``: the block's id on its first page, the page's offset in
  the block on the others; the scheduler's ``_block_pages``). A node's size in
  tokens is ``len(key) * weight``. Units of different kinds never compare
  equal, so a tree may hold both without mixing them in one node.
* Access time is a logical counter, as SGLang's is (``get_and_increase_time_counter``);
  ties are broken by node creation order.
* The tree holds no KV indices: the scheduler owns the token accounting.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterator, Sequence

Key = tuple[Hashable, ...]


class TreeNode:
    """One edge of the tree: the key units leading to this node from its parent."""

    __slots__ = ("children", "key", "last_access", "lock_ref", "parent", "serial", "weight")

    def __init__(self, parent: TreeNode | None, key: Key, weight: int, serial: int) -> None:
        self.children: dict[Hashable, TreeNode] = {}
        self.parent = parent
        self.key = key
        self.weight = weight
        self.lock_ref = 0
        self.last_access = 0
        self.serial = serial

    @property
    def tokens(self) -> int:
        return len(self.key) * self.weight

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"TreeNode(#{self.serial}, units={len(self.key)}, w={self.weight}, lock={self.lock_ref})"


class RadixCache:
    """Prefix cache with SGLang's lock/evict semantics, sized in tokens."""

    def __init__(self) -> None:
        self._serial = 0
        self._clock = 0
        self.root = TreeNode(None, (), 1, self._next_serial())
        self.root.lock_ref = 1  # the root is never evicted
        self.evictable_size = 0
        self.protected_size = 0
        #: bumped whenever the tree's shape changes (insert, split, evict)
        self.version = 0

    # -- bookkeeping -----------------------------------------------------------
    def _next_serial(self) -> int:
        self._serial += 1
        return self._serial

    def _touch(self, node: TreeNode) -> None:
        self._clock += 1
        node.last_access = self._clock

    @property
    def total_size(self) -> int:
        return self.evictable_size + self.protected_size

    # -- match / insert --------------------------------------------------------
    def match_prefix(
        self, key: Sequence[Hashable], weight: int, n: int | None = None
    ) -> tuple[int, TreeNode]:
        """Longest cached prefix of ``key[:n]``: (tokens, last matched node).

        Matched nodes count as accessed; an edge only partly matched is split
        so the returned node ends exactly at the match (as SGLang does). ``n``
        bounds the key without copying it (a request's key runs to the end of
        its longest possible output).
        """
        i, node = self._walk(key, weight, len(key) if n is None else min(n, len(key)))
        return i * weight, node

    def insert(self, key: Sequence[Hashable], weight: int, n: int | None = None) -> tuple[int, TreeNode]:
        """Add ``key[:n]``; returns (tokens that were already cached, node at its end)."""
        n = len(key) if n is None else min(n, len(key))
        i, node = self._walk(key, weight, n)
        present = i * weight
        if i < n:
            if node is not self.root and node.weight != weight:
                raise ValueError("a key cannot continue a node of another unit size")
            new = TreeNode(node, tuple(key[i:n]), weight, self._next_serial())
            node.children[key[i]] = new
            self._touch(new)
            self.evictable_size += new.tokens
            self.version += 1
            node = new
        return present, node

    def _walk(self, key: Sequence[Hashable], weight: int, n: int) -> tuple[int, TreeNode]:
        """Follow ``key[:n]`` down the tree, touching each node passed: (units
        matched, last node). A partly matched edge is split so the node ends at
        the match."""
        node = self.root
        self._touch(node)
        i = 0
        while i < n:
            child = node.children.get(key[i])
            if child is None or child.weight != weight:
                break
            self._touch(child)
            common = _common_len(child.key, key, i, n)
            if common < len(child.key):
                node = self._split(child, common)
                i += common
                break
            node = child
            i += common
        return i, node

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """Cut ``child``'s edge after ``at`` units; returns the new upper node."""
        parent = child.parent
        assert parent is not None
        upper = TreeNode(parent, child.key[:at], child.weight, self._next_serial())
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        parent.children[child.key[0]] = upper  # same dict slot: child order is kept
        child.key = child.key[at:]
        child.parent = upper
        upper.children[child.key[0]] = child
        self.version += 1
        return upper

    # -- locks -----------------------------------------------------------------
    def inc_lock_ref(self, node: TreeNode) -> int:
        """Protect the path root..node; returns the tokens that stopped being evictable."""
        delta = 0
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= node.tokens
                self.protected_size += node.tokens
                delta += node.tokens
            node.lock_ref += 1
            node = node.parent  # type: ignore[assignment]  # below the root every node has a parent
        return delta

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Release one lock on root..node; returns the tokens that became evictable."""
        delta = 0
        while node is not self.root:
            if node.lock_ref <= 0:
                raise ValueError("lock reference underflow")
            if node.lock_ref == 1:
                self.evictable_size += node.tokens
                self.protected_size -= node.tokens
                delta += node.tokens
            node.lock_ref -= 1
            node = node.parent  # type: ignore[assignment]  # below the root every node has a parent
        return delta

    # -- eviction --------------------------------------------------------------
    def evict(self, tokens: int) -> int:
        """Free at least ``tokens`` (if possible) from unlocked leaves, LRU first.

        Returns the tokens freed (whole nodes, so possibly more than asked).
        """
        if tokens <= 0:
            return 0
        heap = [(n.last_access, n.serial, n) for n in self._leaves() if n.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[0]]
            freed += leaf.tokens
            self.evictable_size -= leaf.tokens
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, parent.serial, parent))
        if freed:
            self.version += 1
        return freed

    def _leaves(self) -> Iterator[TreeNode]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node is not self.root:
                yield node

    # -- inspection ------------------------------------------------------------
    def depth_tokens(self, node: TreeNode) -> int:
        """Tokens on the path root..node."""
        total = 0
        while node is not self.root:
            total += node.tokens
            node = node.parent  # type: ignore[assignment]  # below the root every node has a parent
        return total

    def node_count(self) -> int:
        count = 0
        stack = [self.root]
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children.values())
        return count - 1


#: units compared at once (C-level tuple equality) before one by one
_STRIDE = 64


def _common_len(edge: Key, key: Sequence[Hashable], start: int, end: int) -> int:
    """Units ``edge`` and ``key[start:end]`` share from their start. Compared a
    stride at a time, then unit by unit in the stride that differs: a block of
    512 tokens is 512 units at page size 1, and most edges match whole."""
    limit = min(len(edge), end - start)
    i = 0
    while i + _STRIDE <= limit and edge[i : i + _STRIDE] == tuple(key[start + i : start + i + _STRIDE]):
        i += _STRIDE
    while i < limit and edge[i] == key[start + i]:
        i += 1
    return i
