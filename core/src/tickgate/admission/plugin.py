"""Entry point ``admission = tickgate.admission.plugin``: built-in admission plugins, registered
through the same hooks and entry-point group as a third party's.

Policies: ``sla-lanes``, ``deadline-edf``, ``fair-share``, ``aimd``, ``lpm``; and the
``prefix-cache`` KV allocator that ``lpm`` needs. Modules load inside the hooks.
"""

from __future__ import annotations

from ..hookspecs import Register, hookimpl


@hookimpl
def register_admission_policies(register: Register) -> None:
    from .aimd import Aimd
    from .deadline import DeadlineEdf
    from .fair_share import FairShare
    from .lanes import SlaLanes
    from .lpm import LongestPrefixMatch

    for cls in (SlaLanes, DeadlineEdf, FairShare, Aimd, LongestPrefixMatch):
        register(cls)


@hookimpl
def register_kv_allocators(register: Register) -> None:
    from .prefix_cache import PrefixCacheAllocator

    register(PrefixCacheAllocator)
