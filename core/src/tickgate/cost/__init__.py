"""What a replay or a plan costs: GPU-hours, and dollars from a price table (docs/report.md, "Cost";
docs/plan.md, "Cost").

:mod:`.shape` reads a policy document's GPUs (kind and count per replica, replicas per pool),
:mod:`.prices` loads a table of USD per GPU-hour, :mod:`.usage` is what a replica used
(:class:`ReplicaUsage`: a pool's replica, its GPUs, from when it was provisioned to when it
stopped), :mod:`.report` turns usage and prices into a report's ``cost`` section.

This package sits low in the layers (it imports only :mod:`tickgate.util`) so the fleet can
record :class:`ReplicaUsage` itself. GPU names are matched through the timing catalogue's
aliases, which live above it: callers hand the price table a *resolver*
(:func:`tickgate.timing.gpus.gpu_key`).
"""

from __future__ import annotations

from .prices import PriceTable, load_prices, policy_prices
from .report import check_priced, cost_section, recorded_usage, replay_cost
from .shape import PoolShape, gpus, pool_shapes
from .usage import ReplicaUsage, UsageSink, static_usage

__all__ = [
    "PoolShape",
    "PriceTable",
    "ReplicaUsage",
    "UsageSink",
    "check_priced",
    "cost_section",
    "gpus",
    "load_prices",
    "policy_prices",
    "pool_shapes",
    "recorded_usage",
    "replay_cost",
    "static_usage",
]
