"""tickgate: deterministic inference-scheduling replay and release gates.

The public API: everything a plugin author needs is importable from here::

    from tickgate import BackendMirror, InputError, Register, hookimpl

``__all__`` lists it; docs/plugins.md ("Public API") says what each name is.
The submodules (``tickgate.readers.common`` ...) are tickgate's own and may
move; plugins, the in-tree adapters included, import only these names.

The names resolve lazily (PEP 562 ``__getattr__``): ``import tickgate``
imports no submodule, and ``from tickgate import X`` imports only the module
that defines X. Every command imports every plugin's entry-point module, so
start-up costs no more than the modules the plugins actually use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> the module defining it (relative to this package), with
#: ``:attribute`` where the module's own name for it differs
_EXPORTS: dict[str, str] = {
    # hooks and the registry
    "hookimpl": "hookspecs",
    "Register": "hookspecs",
    "get_registry": "plugins",
    # the plugin interfaces and what they are given
    "Plugin": "interfaces",
    "Scheduler": "interfaces",
    "KvAllocator": "interfaces",
    "AdmissionPolicy": "interfaces",
    "BackendMirror": "interfaces",
    "EvidenceParser": "interfaces",
    "GateSignal": "interfaces",
    "WorkloadReader": "interfaces",
    "TimingModel": "interfaces",
    "Router": "interfaces",
    "ReplicaView": "interfaces",
    "RouterContext": "interfaces",
    "BuildContext": "interfaces",
    "AdmissionContext": "interfaces",
    "Clock": "interfaces",
    "Horizon": "interfaces",
    "FilePart": "interfaces",
    # KV-cache events a scheduler records (optional capability)
    "BlockStored": "interfaces",
    "BlockRemoved": "interfaces",
    "AllBlocksCleared": "interfaces",
    "KvEvent": "interfaces",
    "external_block_hash": "kv_events",
    "require_kv_events": "kv_events",
    "KvEventWriter": "replay.kv_events_out",
    "SignalResult": "gate.protocol",
    "Comparison": "gate.comparison",
    "TraceReader": "importers._common",
    "ArrivalOrder": "importers._common",
    "PagedAllocator": "builtin.paged",
    # values
    "Request": "model",
    "TickRecord": "model",
    "RequestOutcome": "model",
    "tick_record": "model",
    "completed_outcome": "model",
    "rejected_outcome": "model",
    "EncodedDetail": "replay.report",
    "LinearTiming": "replay.timing",
    "KvCapacity": "timing.capacity",
    "kv_capacity": "timing.capacity",
    "kv_cache_tokens": "timing.capacity",
    "run_starts": "replay.blockruns",
    # errors
    "TickgateError": "errors",
    "InputError": "errors",
    "ConfigError": "errors",
    "PluginError": "errors",
    "ReplayError": "errors",
    # running tickgate and a scheduler, reading and writing files (plugin commands, tests)
    "main": "cli",
    "run_scheduler": "replay.engine:run",
    "load_json": "locations",
    "parse_json": "locations",
    "validate": "schemas",
    "write_json": "atomic",
    "exit_with": "cli",
    # readers of engine output: files, fields, the observation document
    "read_bytes": "readers.common",
    "read_text": "readers.common",
    "head_text": "readers.common",
    "parse_engine_json": "readers.common",
    "iter_json_lines": "readers.common",
    "is_number": "readers.common",
    "Fields": "readers.common",
    "not_this_format": "readers.common",
    "require_any_key": "readers.common",
    "pick_line": "readers.common",
    "provenance": "readers.common",
    "document": "readers.common",
    "clean_aggregates": "readers.common",
    "summary_stats": "readers.stats:summarize",
    # readers: bench-client results (vllm bench serve, sglang.bench_serving)
    "ARRAY_KEYS": "readers.benchkeys",
    "RESULT_KEYS": "readers.benchkeys",
    "result_object": "readers.benchkeys",
    "require_result": "readers.benchkeys",
    "result_figures": "readers.benchkeys",
    "request_rate": "readers.benchkeys",
    "has_arrays": "readers.benchkeys",
    "requests_from_arrays": "readers.benchkeys",
    # readers: Prometheus /metrics scrapes
    "ScrapeMirror": "readers.scrapemirror",
    "Scrape": "readers.prometheus",
    "histogram_figures": "readers.scrapemirror",
    "histogram_ms": "readers.prometheus",
    # readers: KV-cache event captures
    "KvSummary": "readers.kv_events",
    "read_kv_events": "readers.kvmirror",
    "first_batch_shape": "readers.kv_events",
    "legacy_array_batch": "readers.kvmirror",
    "kv_events_document": "readers.kvmirror",
    # readers: SSE captures
    "SseDialect": "readers.ssemirror",
    "SseMirrorBase": "readers.ssemirror",
    "SseEvidenceBase": "readers.ssemirror",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(f".{module}", __name__), attribute or name)
    globals()[name] = value  # resolved once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
