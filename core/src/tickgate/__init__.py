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
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module defining it (relative to this package), with ``:attribute`` where the
#: module's own name for it differs; four groups, each a section of docs/plugins.md, "Public API"
#: the plugin contract: hook markers, the registry, the plugin bases and what they are given, the values
#: that cross the contract, the errors a plugin raises
_CONTRACT: dict[str, str] = {
    "hookimpl": "host.hookspecs",
    "Register": "host.hookspecs",
    "get_registry": "host.registry",
    "Plugin": "interfaces.plugin",
    "Scheduler": "interfaces.engine",
    "KvAllocator": "interfaces.engine",
    "AdmissionPolicy": "interfaces.engine",
    "BackendMirror": "interfaces.readers",
    "EvidenceParser": "interfaces.readers",
    "GateSignal": "interfaces.gate",
    "SignalResult": "interfaces.gate",
    "WorkloadReader": "interfaces.readers",
    "TimingModel": "interfaces.timing",
    "Router": "interfaces.routing",
    "ReplicaView": "interfaces.routing",
    "RouterContext": "interfaces.routing",
    "Autoscaler": "interfaces.autoscaling",
    "AutoscalerContext": "interfaces.autoscaling",
    "PoolSignals": "interfaces.autoscaling",
    "ScaleDecision": "interfaces.autoscaling",
    "BuildContext": "interfaces.engine",
    "AdmissionContext": "interfaces.engine",
    "Clock": "interfaces.engine",
    "Horizon": "interfaces.engine",
    "FilePart": "interfaces.readers",
    "BlockStored": "interfaces.kv_events",
    "BlockRemoved": "interfaces.kv_events",
    "AllBlocksCleared": "interfaces.kv_events",
    "KvEvent": "interfaces.kv_events",
    "Request": "interfaces.model",
    "TickRecord": "interfaces.model",
    "RequestOutcome": "interfaces.model",
    "tick_record": "interfaces.model",
    "completed_outcome": "interfaces.model",
    "rejected_outcome": "interfaces.model",
    "TickgateError": "util.errors",
    "InputError": "util.errors",
    "ConfigError": "util.errors",
    "PluginError": "util.errors",
    "ReplayError": "util.errors",
}

#: built-in parts a plugin may reuse or subclass: an allocator, trace readers, a timing model, KV capacity,
#: KV events, the gate's comparison, report and workload helpers
_BUILDING_BLOCKS: dict[str, str] = {
    "PagedAllocator": "kv.paged",
    "TraceReader": "importers._common",
    "ArrivalOrder": "importers._common",
    "ClientRunReader": "client_runs.reader",
    "LinearTiming": "timing.linear",
    "KvCapacity": "timing.capacity",
    "kv_capacity": "timing.capacity",
    "kv_cache_tokens": "timing.capacity",
    "external_block_hash": "interfaces.kv_events",
    "require_kv_events": "interfaces.kv_events",
    "KvEventWriter": "replay.kv_events_out",
    "Comparison": "gate.comparison",
    "EncodedDetail": "replay.fingerprint",
    "run_starts": "workload.block_runs",
}

#: running tickgate and a scheduler, reading and writing files (plugin commands, tests), and the
#: conformance of a scheduler mirror with a recorded run of its real engine
_RUNNING: dict[str, str] = {
    "main": "commands.cli",
    "exit_with": "commands.cli",
    "run_scheduler": "replay.engine:run",
    "load_json": "util.locations",
    "parse_json": "util.locations",
    "validate": "util.schemas",
    "write_json": "util.atomic",
    "ConformanceSpec": "conformance.check",
    "conformance_command": "conformance.check",
    "conformance_check": "conformance.check:check",
    "load_reference_workload": "conformance.check",
    "read_reference_steps": "conformance.check:read_steps",
    "compare_steps": "conformance.check:compare",
    "observe_mirror": "conformance.check",
}

#: the readers' helper kit: what the shipped backend mirrors share (files and fields, bench-client results,
#: Prometheus scrapes, KV-event captures, SSE captures)
_READERS_KIT: dict[str, str] = {
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
    "ARRAY_KEYS": "readers.benchkeys",
    "RESULT_KEYS": "readers.benchkeys",
    "result_object": "readers.benchkeys",
    "require_result": "readers.benchkeys",
    "result_figures": "readers.benchkeys",
    "request_rate": "readers.benchkeys",
    "has_arrays": "readers.benchkeys",
    "requests_from_arrays": "readers.benchkeys",
    "ScrapeMirror": "readers.scrapemirror",
    "Scrape": "readers.prometheus",
    "histogram_figures": "readers.scrapemirror",
    "histogram_ms": "readers.prometheus",
    "KvSummary": "readers.kv_events",
    "read_kv_events": "readers.kvmirror",
    "first_batch_shape": "readers.kv_events",
    "legacy_array_batch": "readers.kvmirror",
    "kv_events_document": "readers.kvmirror",
    "SseDialect": "readers.ssemirror",
    "SseMirrorBase": "readers.ssemirror",
    "SseEvidenceBase": "readers.ssemirror",
}
_EXPORTS: dict[str, str] = {**_CONTRACT, **_BUILDING_BLOCKS, **_RUNNING, **_READERS_KIT}

if TYPE_CHECKING:  # generated by tools/public_api.py from _EXPORTS; do not edit
    from .client_runs.reader import (
        ClientRunReader as ClientRunReader,
    )
    from .commands.cli import (
        exit_with as exit_with,
        main as main,
    )
    from .conformance.check import (
        ConformanceSpec as ConformanceSpec,
        check as conformance_check,
        compare as compare_steps,
        conformance_command as conformance_command,
        load_reference_workload as load_reference_workload,
        observe_mirror as observe_mirror,
        read_steps as read_reference_steps,
    )
    from .gate.comparison import (
        Comparison as Comparison,
    )
    from .host.hookspecs import (
        Register as Register,
        hookimpl as hookimpl,
    )
    from .host.registry import (
        get_registry as get_registry,
    )
    from .importers._common import (
        ArrivalOrder as ArrivalOrder,
        TraceReader as TraceReader,
    )
    from .interfaces.autoscaling import (
        Autoscaler as Autoscaler,
        AutoscalerContext as AutoscalerContext,
        PoolSignals as PoolSignals,
        ScaleDecision as ScaleDecision,
    )
    from .interfaces.engine import (
        AdmissionContext as AdmissionContext,
        AdmissionPolicy as AdmissionPolicy,
        BuildContext as BuildContext,
        Clock as Clock,
        Horizon as Horizon,
        KvAllocator as KvAllocator,
        Scheduler as Scheduler,
    )
    from .interfaces.gate import (
        GateSignal as GateSignal,
        SignalResult as SignalResult,
    )
    from .interfaces.kv_events import (
        AllBlocksCleared as AllBlocksCleared,
        BlockRemoved as BlockRemoved,
        BlockStored as BlockStored,
        KvEvent as KvEvent,
        external_block_hash as external_block_hash,
        require_kv_events as require_kv_events,
    )
    from .interfaces.model import (
        Request as Request,
        RequestOutcome as RequestOutcome,
        TickRecord as TickRecord,
        completed_outcome as completed_outcome,
        rejected_outcome as rejected_outcome,
        tick_record as tick_record,
    )
    from .interfaces.plugin import (
        Plugin as Plugin,
    )
    from .interfaces.readers import (
        BackendMirror as BackendMirror,
        EvidenceParser as EvidenceParser,
        FilePart as FilePart,
        WorkloadReader as WorkloadReader,
    )
    from .interfaces.routing import (
        ReplicaView as ReplicaView,
        Router as Router,
        RouterContext as RouterContext,
    )
    from .interfaces.timing import (
        TimingModel as TimingModel,
    )
    from .kv.paged import (
        PagedAllocator as PagedAllocator,
    )
    from .readers.benchkeys import (
        ARRAY_KEYS as ARRAY_KEYS,
        RESULT_KEYS as RESULT_KEYS,
        has_arrays as has_arrays,
        request_rate as request_rate,
        requests_from_arrays as requests_from_arrays,
        require_result as require_result,
        result_figures as result_figures,
        result_object as result_object,
    )
    from .readers.common import (
        Fields as Fields,
        clean_aggregates as clean_aggregates,
        document as document,
        head_text as head_text,
        is_number as is_number,
        iter_json_lines as iter_json_lines,
        not_this_format as not_this_format,
        parse_engine_json as parse_engine_json,
        pick_line as pick_line,
        provenance as provenance,
        read_bytes as read_bytes,
        read_text as read_text,
        require_any_key as require_any_key,
    )
    from .readers.kv_events import (
        KvSummary as KvSummary,
        first_batch_shape as first_batch_shape,
    )
    from .readers.kvmirror import (
        kv_events_document as kv_events_document,
        legacy_array_batch as legacy_array_batch,
        read_kv_events as read_kv_events,
    )
    from .readers.prometheus import (
        Scrape as Scrape,
        histogram_ms as histogram_ms,
    )
    from .readers.scrapemirror import (
        ScrapeMirror as ScrapeMirror,
        histogram_figures as histogram_figures,
    )
    from .readers.ssemirror import (
        SseDialect as SseDialect,
        SseEvidenceBase as SseEvidenceBase,
        SseMirrorBase as SseMirrorBase,
    )
    from .readers.stats import (
        summarize as summary_stats,
    )
    from .replay.engine import (
        run as run_scheduler,
    )
    from .replay.fingerprint import (
        EncodedDetail as EncodedDetail,
    )
    from .replay.kv_events_out import (
        KvEventWriter as KvEventWriter,
    )
    from .timing.capacity import (
        KvCapacity as KvCapacity,
        kv_cache_tokens as kv_cache_tokens,
        kv_capacity as kv_capacity,
    )
    from .timing.linear import (
        LinearTiming as LinearTiming,
    )
    from .util.atomic import (
        write_json as write_json,
    )
    from .util.errors import (
        ConfigError as ConfigError,
        InputError as InputError,
        PluginError as PluginError,
        ReplayError as ReplayError,
        TickgateError as TickgateError,
    )
    from .util.locations import (
        load_json as load_json,
        parse_json as parse_json,
    )
    from .util.schemas import (
        validate as validate,
    )
    from .workload.block_runs import (
        run_starts as run_starts,
    )
# end of the generated block

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
