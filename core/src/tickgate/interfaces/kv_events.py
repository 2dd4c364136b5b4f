"""KV-cache events a scheduler emits: the values and the optional scheduler capability.

vLLM publishes what its prefix cache does as ``KVCacheEvent`` values
(``vllm/distributed/kv_events.py``): ``BlockStored`` when full blocks are hashed
and registered (``BlockPool.cache_full_blocks``), ``BlockRemoved`` when a cached
block is evicted to be reused (``BlockPool._maybe_evict_cached_block``),
``AllBlocksCleared`` on ``reset_prefix_cache``. SGLang's radix cache publishes
the same three. KV-aware routers (Dynamo's KV router, llm-d's precise prefix
cache scorer) rebuild each replica's resident set from them.

A scheduler mirror that keeps a prefix cache can record the same events
(``records_kv_events = True`` and the three methods of
:class:`~tickgate.interfaces.Scheduler`: ``enable_kv_events``,
``drain_kv_events``, ``prompt_block_hashes``; docs/plugins.md). The values
here are what it returns; :mod:`tickgate.replay.kv_events_out` writes them in
vLLM's msgpack framing and a fleet router reads them in process.

What differs from vLLM's struct, and why: tickgate requests carry token counts,
not token ids, so ``BlockStored`` has ``token_count`` (vLLM's
``len(token_ids)``: whole blocks only, ``len(block_hashes) * block_size``)
where vLLM has ``token_ids``; LoRA fields are absent (tickgate has no adapters);
``medium`` is kept (``"GPU"``, vLLM's ``MEDIUM_GPU``) for tiers a mirror may
add. Block hashes are 64-bit unsigned ints, as vLLM's ``ExternalBlockHash``
with ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` (its default): equal exactly when
the token prefixes up to and including the block are (up to collisions); their
values are the mirror's own, never vLLM's (which hash token ids with a seed).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import attrs

from ..util.errors import TickgateError

__all__ = [
    "MEDIUM_GPU",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "KvEvent",
    "external_block_hash",
    "records_kv_events",
    "require_kv_events",
]

#: vLLM's ``MEDIUM_GPU`` (``vllm/v1/core/kv_cache_utils.py``)
MEDIUM_GPU = "GPU"
_MASK64 = (1 << 64) - 1


@attrs.frozen(slots=True)
class BlockStored:
    """Full blocks registered in the prefix cache, first block first.

    ``parent_block_hash``: the hash of the block before the first one (None when
    the first is the request's first block), so a consumer can chain them into
    a radix tree as Dynamo's indexer does. ``token_count``: tokens the blocks
    hold (always ``len(block_hashes) * block_size``: only full blocks are stored).
    """

    block_hashes: tuple[int, ...]
    parent_block_hash: int | None
    token_count: int
    block_size: int
    medium: str = MEDIUM_GPU


@attrs.frozen(slots=True)
class BlockRemoved:
    """Cached blocks evicted (vLLM: one event per evicted block, as it evicts them)."""

    block_hashes: tuple[int, ...]
    medium: str = MEDIUM_GPU


@attrs.frozen(slots=True)
class AllBlocksCleared:
    """The whole prefix cache dropped (vLLM ``reset_prefix_cache``)."""


KvEvent = BlockStored | BlockRemoved | AllBlocksCleared


def external_block_hash(key: Hashable) -> int:
    """A mirror's block key as a 64-bit unsigned hash.

    Ints (the chained keys mirrors build from ``hash()`` of int tuples) keep
    their low 64 bits, as vLLM's ``maybe_convert_block_hash`` keeps the low 64
    bits of its digest; other keys go through ``hash()`` first. Deterministic
    across processes only for keys made of ints (str hashes are salted by
    PYTHONHASHSEED), which is what the shipped mirrors use.
    """
    if type(key) is int:
        return key & _MASK64
    return hash(key) & _MASK64


def records_kv_events(scheduler: Any) -> bool:
    """Whether ``scheduler`` (an instance or class) can record KV events."""
    return bool(getattr(scheduler, "records_kv_events", False))


def require_kv_events(scheduler: Any, name: str) -> None:
    """Refuse a scheduler that cannot record KV events, naming it; the one-line error
    the CLI prints (a fleet's router or ``tickgate replay --kv-events``)."""
    if not records_kv_events(scheduler):
        raise TickgateError(
            f'scheduler "{name}" does not record KV-cache events (records_kv_events is '
            "false); --kv-events and the prefix-aware router need a scheduler that keeps a "
            "prefix cache and records them, such as vllm-v1 (docs/plugins.md)"
        )
