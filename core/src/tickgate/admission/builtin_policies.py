"""Entry point ``admission = tickgate.admission.builtin_policies``: the built-in admission policies,
registered through the same hook and entry-point group as a third party's.

Policies: ``priority-fcfs`` (the default), ``sla-lanes``, ``deadline-edf``, ``fair-share``, ``aimd``,
``lpm`` (with the ``prefix-cache`` KV allocator, :mod:`tickgate.kv`). Modules load inside the hook.
"""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_admission_policies(register: Register) -> None:
    from .aimd import Aimd
    from .deadline import DeadlineEdf
    from .fair_share import FairShare
    from .lanes import SlaLanes
    from .lpm import LongestPrefixMatch
    from .priority_fcfs import PriorityFcfs

    for cls in (PriorityFcfs, SlaLanes, DeadlineEdf, FairShare, Aimd, LongestPrefixMatch):
        register(cls)
