"""The ``prefix-cache`` KV allocator: paged KV with a shared prefix cache.

A request's prompt pages are identified by *chained* hashes: page ``i``'s key
hashes page ``i - 1``'s key with the ``prefix_blocks`` ids that cover the
page's tokens (``block_size`` tokens per id, which may differ from the page
size), so two prompts share page ``i`` only if they share everything before
it. Only full prompt pages get a key. Keys are Python hashes of tuples of
ints, which do not depend on PYTHONHASHSEED; nothing keyed reaches output.

Pages are either private to one owner or cached (keyed, reference-counted).
When a reservation's leading pages are cached it references them instead of
taking new ones, and their tokens need no prefill (capped at ``prompt - 1``
tokens, as in vLLM: the last prompt token is always computed). When an
owner is freed its cached pages stay resident with no reference, evictable
in LRU order (tail pages first, so shared heads survive longest); a new
reservation evicts only when the truly free pages run out.

``used`` counts referenced and private pages; evictable cached pages count as
free. Invariant: private + resident cached pages <= capacity; after every
owner is freed ``used`` is 0.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..interfaces import KvAllocator
from ..util.errors import PluginError

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "block_size": {
            "type": "integer",
            "minimum": 1,
            "maximum": 65536,
            "description": "Tokens per prefix_blocks id in the workload (default: the page size).",
        },
    },
}


class PrefixCacheAllocator(KvAllocator):
    name = "prefix-cache"
    description = (
        "Paged KV with a prefix cache: chained block hashes, refcounts, LRU eviction, hit accounting."
    )
    options_schema = OPTIONS_SCHEMA
    has_prefix_cache = True

    def __init__(self, capacity: int, page_size: int, block_size: int | None = None) -> None:
        self.capacity = capacity
        self.page_size = page_size
        self.block_size = block_size or page_size
        self.refs: dict[int, int] = {}  # resident cached page key -> references
        self.lru: OrderedDict[int, None] = OrderedDict()  # unreferenced cached keys, LRU first
        self.owners: dict[str, tuple[list[int], int]] = {}  # owner -> (cached keys it holds, private)
        self.private = 0
        self.referenced = 0
        self.hit_tokens = 0
        self.query_tokens = 0
        self.evicted = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], capacity: int, page_size: int) -> PrefixCacheAllocator:
        return cls(capacity, page_size, options.get("block_size"))

    # -- keys ---------------------------------------------------------------------
    def page_keys(self, blocks: tuple[int, ...], prompt_tokens: int | None = None) -> list[int]:
        """Chained keys of the prompt's full pages that ``blocks`` describe."""
        ps, bs = self.page_size, self.block_size
        covered = len(blocks) * bs
        if prompt_tokens is not None:
            covered = min(covered, prompt_tokens)
        keys: list[int] = []
        h = 0
        for i in range(covered // ps):
            start = i * ps
            lo, hi = start // bs, (start + ps - 1) // bs
            h = hash((h, start - lo * bs, blocks[lo : hi + 1]))
            keys.append(h)
        return keys

    def _leading(self, keys: list[int]) -> int:
        n = 0
        for key in keys:
            if key not in self.refs:
                break
            n += 1
        return n

    def match_prefix(self, blocks: tuple[int, ...]) -> int:
        """Leading pages of ``blocks`` resident in the cache."""
        return self._leading(self.page_keys(blocks))

    def match_keys(self, keys: list[int]) -> int:
        return self._leading(keys)

    def _shared(self, keys: list[int], prompt_tokens: int) -> int:
        return min(self._leading(keys), (prompt_tokens - 1) // self.page_size)

    # -- allocator protocol -----------------------------------------------------
    @property
    def used(self) -> int:
        return self.private + self.referenced

    def plan_prefix(self, blocks: tuple[int, ...], prompt_tokens: int, pages: int) -> tuple[int, int]:
        keys = self.page_keys(blocks, prompt_tokens)
        shared = self._shared(keys, prompt_tokens)
        referenced = sum(1 for key in keys[:shared] if self.refs[key])
        return shared * self.page_size, pages - referenced

    def reserve_prefix(self, owner: str, pages: int, blocks: tuple[int, ...], prompt_tokens: int) -> int:
        if owner in self.owners:
            raise PluginError(f"prefix-cache allocator: {owner!r} already holds pages")
        keys = self.page_keys(blocks, prompt_tokens)[:pages]
        shared = self._shared(keys, prompt_tokens)
        cost = pages - sum(1 for key in keys[:shared] if self.refs[key])
        self._check(cost)
        held = keys[:shared]
        for key in held:
            self._ref(key)
        self._make_room(pages - shared)
        for key in keys[shared:]:
            if key not in self.refs:  # a later page can be resident while an earlier one was evicted
                self.refs[key] = 1
                self.referenced += 1
                held.append(key)
        private = pages - len(held)
        self.private += private
        self.owners[owner] = (held, private)
        self.query_tokens += prompt_tokens
        self.hit_tokens += shared * self.page_size
        return shared * self.page_size

    def reserve(self, owner: str, pages: int) -> None:
        if owner in self.owners:
            raise PluginError(f"prefix-cache allocator: {owner!r} already holds pages")
        self._check(pages)
        self._make_room(pages)
        self.private += pages
        self.owners[owner] = ([], pages)

    def grow(self, owner: str, pages: int) -> None:
        if owner not in self.owners:
            raise PluginError(f"prefix-cache allocator: {owner!r} holds no pages")
        self._check(pages)
        self._make_room(pages)
        keys, private = self.owners[owner]
        self.owners[owner] = (keys, private + pages)
        self.private += pages

    def free(self, owner: str) -> int:
        entry = self.owners.pop(owner, None)
        if entry is None:
            return 0
        keys, private = entry
        self.private -= private
        for key in reversed(keys):
            n = self.refs[key] - 1
            self.refs[key] = n
            if n == 0:
                self.referenced -= 1
                self.lru[key] = None
        return len(keys) + private

    def held(self, owner: str) -> int:
        entry = self.owners.get(owner)
        return len(entry[0]) + entry[1] if entry else 0

    # -- internals ---------------------------------------------------------------
    def _check(self, pages: int) -> None:
        if pages < 0 or self.used + pages > self.capacity:
            raise PluginError(
                f"prefix-cache allocator: taking {pages} pages with {self.used} of "
                f"{self.capacity} used would exceed capacity"
            )

    def _ref(self, key: int) -> None:
        if self.refs[key] == 0:
            del self.lru[key]
            self.referenced += 1
        self.refs[key] += 1

    def _make_room(self, new_pages: int) -> None:
        """Evict unreferenced cached pages (LRU first) until ``new_pages`` physical pages are free."""
        short = self.private + len(self.refs) + new_pages - self.capacity
        while short > 0:
            key, _ = self.lru.popitem(last=False)
            del self.refs[key]
            self.evicted += 1
            short -= 1

    def summary(self) -> Mapping[str, Any]:
        return {
            "prefix_hit_tokens": self.hit_tokens,
            "prefix_query_tokens": self.query_tokens,
            "prefix_hit_rate": round(self.hit_tokens / self.query_tokens, 6) if self.query_tokens else 0.0,
            "evicted_pages": self.evicted,
            "cached_pages": len(self.refs),
        }
