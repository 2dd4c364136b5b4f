"""The plugin interfaces: what a scheduler, KV allocator, admission policy,
timing model, backend mirror, evidence parser, gate signal, workload reader, router and
autoscaler must provide.

Plugins subclass these bases (or just match them): the bases only hold
defaults and documentation. Optional attributes are declared on their base
with their default; the core reads them through :func:`optional_attribute`,
so a plugin that matches the protocol without subclassing gets the same
default. Every plugin class has

* ``name``: the name a policy file selects it by, unique per kind;
* ``description``: one line shown by ``tickgate plugins``;
* ``options_schema``: JSON Schema of its ``options`` block (validated before
  the plugin is built, errors located in the policy file).
"""

from __future__ import annotations

from typing import Any

from .autoscaling import Autoscaler, AutoscalerContext, PoolSignals, ScaleDecision
from .engine import AdmissionContext, AdmissionPolicy, BuildContext, Clock, Horizon, KvAllocator, Scheduler
from .gate import GateSignal, SignalResult
from .kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KvEvent
from .model import Request, RequestOutcome, TickRecord
from .plugin import EMPTY_OPTIONS, Plugin
from .readers import BackendMirror, EvidenceParser, FilePart, WorkloadReader
from .routing import ReplicaView, Router, RouterContext
from .timing import SPAN_CHUNK, TimingModel

#: optional plugin attribute -> the base that declares it with its default
_OPTIONAL: dict[str, type] = {
    "uses_admission_policy": Scheduler,
    "supported_admission": Scheduler,
    "uses_kv_allocator": Scheduler,
    "admission_note": Scheduler,
    "decoded_lists_every_sample": Scheduler,
    "records_kv_events": Scheduler,
    "supports_data_parallel": Scheduler,
    "accepts_transferred_kv": Scheduler,
    "has_prefix_cache": KvAllocator,
    "dynamic": AdmissionPolicy,
    "declared_kind": BackendMirror,
    "accepts_line": BackendMirror,
    "artifact_files": BackendMirror,
    "reads_parts": WorkloadReader,
    "default_block_size": WorkloadReader,
    "file_kind": WorkloadReader,
    "source": WorkloadReader,
    "max_concurrency": WorkloadReader,
    "uses_replica_state": Router,
    "reads_cached_prefixes": Router,
}


def optional_attribute(plugin: Any, attribute: str) -> Any:
    """``plugin.<attribute>``, or the default its base declares.

    The registry accepts any object with a ``name`` (subclassing a base is
    optional), so a plugin may lack an optional attribute: the core reads them
    all here, where the default is the base's own, never a second copy.
    """
    return getattr(plugin, attribute, getattr(_OPTIONAL[attribute], attribute))


__all__ = [
    "EMPTY_OPTIONS",
    "SPAN_CHUNK",
    "AdmissionContext",
    "AdmissionPolicy",
    "AllBlocksCleared",
    "Autoscaler",
    "AutoscalerContext",
    "BackendMirror",
    "BlockRemoved",
    "BlockStored",
    "BuildContext",
    "Clock",
    "EvidenceParser",
    "FilePart",
    "GateSignal",
    "Horizon",
    "KvAllocator",
    "KvEvent",
    "Plugin",
    "PoolSignals",
    "ReplicaView",
    "Request",
    "RequestOutcome",
    "Router",
    "RouterContext",
    "ScaleDecision",
    "Scheduler",
    "SignalResult",
    "TickRecord",
    "TimingModel",
    "WorkloadReader",
    "optional_attribute",
]
