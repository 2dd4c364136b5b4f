"""Entry point ``kv = tickgate.kv.builtin_allocators``: the built-in KV allocators (``paged``, and
``prefix-cache``, which the ``lpm`` admission policy needs), registered through the same hook and
entry-point group as a third party's. Modules load inside the hook."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_kv_allocators(register: Register) -> None:
    from .paged import PagedAllocator
    from .prefix_cache import PrefixCacheAllocator

    register(PagedAllocator)
    register(PrefixCacheAllocator)
