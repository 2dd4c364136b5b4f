"""The ``lpm`` admission policy: longest prefix match first (SGLang's ``lpm`` schedule policy).

Waiting requests that share the longest leading run of pages with what the
KV allocator's prefix cache holds go first: they need the fewest new pages
and the least prefill, and admitting them while their prefix is resident
avoids recomputing it after an eviction. Ties (and requests without
``prefix_blocks``) keep (priority, arrival, id) order.

Match lengths change only when the cache does, and the scheduler walks the
queue only when something changed, so the ranking is computed once per
walk from page keys hashed once per request on arrival. Like SGLang, a
queue longer than ``max_scan`` is walked in plain FCFS order instead (ranking
it would cost more than the hits save).

Needs an allocator with a prefix cache (``kv_allocator: {name: prefix-cache}``);
without one every match is zero and the policy refuses to run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol, cast

from ..interfaces import AdmissionContext, AdmissionPolicy, optional_attribute
from ..interfaces.model import Request
from ..util.errors import ConfigError
from ._queue import OrderedQueue, fcfs_key

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_scan": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000,
            "description": "Rank by prefix match only while the queue is at most this long "
            "(default 128, as SGLang); longer queues go FCFS.",
        },
    },
}


class _KeyedPrefixCache(Protocol):
    """What lpm asks of its allocator (the ``prefix-cache`` one): page keys, and their cached run."""

    def page_keys(self, blocks: tuple[int, ...], prompt_tokens: int | None = None) -> list[int]: ...

    def match_keys(self, keys: list[int]) -> int: ...


class LongestPrefixMatch(AdmissionPolicy):
    name = "lpm"
    description = "Longest cached prefix first (SGLang lpm); needs the prefix-cache KV allocator."
    options_schema = OPTIONS_SCHEMA

    def __init__(self, options: Mapping[str, Any], allocator: _KeyedPrefixCache) -> None:
        self.kv = allocator
        self.max_scan = options.get("max_scan", 128)
        self.queue = OrderedQueue()
        self.keys: dict[str, list[int]] = {}
        self.ranked_walks = 0
        self.fcfs_walks = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> LongestPrefixMatch:
        kv = ctx.allocator
        if kv is None or not optional_attribute(kv, "has_prefix_cache") or not hasattr(kv, "page_keys"):
            name = getattr(kv, "name", "none")
            raise ConfigError(
                f'admission "lpm" orders requests by their prefix-cache hits, but the KV '
                f'allocator "{name}" has no prefix cache; set kv_allocator: {{name: prefix-cache}}'
            )
        return cls(options, cast(_KeyedPrefixCache, kv))  # it has page_keys (checked above)

    def enqueue(self, request: Request, tick: int) -> str | None:
        if request.id in self.queue:
            return "duplicate request id"
        self.queue.push(fcfs_key(request), request)
        if request.prefix_blocks:
            self.keys[request.id] = self.kv.page_keys(request.prefix_blocks, request.prompt_tokens)
        return None

    def candidates(self, tick: int) -> Iterator[Request]:
        if len(self.queue) > self.max_scan:
            self.fcfs_walks += 1
            yield from self.queue.walk()
            return
        self.ranked_walks += 1
        match = self.kv.match_keys
        ranked = sorted(
            (-match(self.keys[k[2]]) if k[2] in self.keys else 0, k, r) for k, r in self.queue.items
        )
        for _, _, request in ranked:
            if request.id in self.queue:
                yield request

    def admitted(self, request: Request, tick: int) -> None:
        self.queue.remove(request)
        self.keys.pop(request.id, None)

    def summary(self) -> Mapping[str, Any]:
        return {"ranked_walks": self.ranked_walks, "fcfs_walks": self.fcfs_walks}

    def __len__(self) -> int:
        return len(self.queue)
