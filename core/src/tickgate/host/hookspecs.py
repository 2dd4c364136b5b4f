"""Hook specifications: the whole contract between tickgate and its plugins.

Every hook receives a ``register`` callable and calls it once per plugin object
it provides, e.g.::

    from tickgate import hookimpl

    @hookimpl
    def register_schedulers(register):
        from mypkg.scheduler import MyScheduler   # import lazily: keep start-up fast
        register(MyScheduler)

A registered object must have a ``name`` attribute (the name a policy file uses)
and may have ``options_schema`` (a JSON Schema for its ``options`` block in a
policy file) and a one-line ``description``. Names are unique per kind: two
distributions registering the same name is an error naming both.

A new hook is one function here decorated with ``@spec("<kind>")``: the
registry derives the hook kinds from the specs (:func:`hook_kinds`), loads
them and checks every plugin against them.

Built-in plugins are registered through these same hooks and the same
``tickgate`` entry-point group that third-party packages use.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import pluggy

hookspec = pluggy.HookspecMarker("tickgate")
hookimpl = pluggy.HookimplMarker("tickgate")

F = TypeVar("F", bound=Callable[..., Any])

Register = Callable[[Any], None]

#: the attribute :func:`spec` sets on a hook specification: the plugin kind its
#: ``register`` calls add to the registry
KIND_ATTRIBUTE = "tickgate_kind"


def spec(kind: str) -> Callable[[F], F]:
    """Declare a hook specification and the plugin kind it registers.

    The kind lives on the spec itself, so a new hook is one decorated function
    here: the registry loads it, checks plugins against it and lists its kind
    (:func:`hook_kinds`) with no list elsewhere to keep in step.
    """

    def mark(function: F) -> F:
        setattr(function, KIND_ATTRIBUTE, kind)
        return hookspec(function)

    return mark


@spec("scheduler")
def register_schedulers(register: Register) -> None:
    """Register scheduler classes (kind ``scheduler``).

    A scheduler owns the semantics of one engine step: which waiting requests
    are admitted, how many prefill tokens each gets, who decodes and who is
    preempted. See :class:`tickgate.interfaces.Scheduler` for the protocol.
    Selected by ``scheduler.name`` in a policy file.
    """


@spec("kv_allocator")
def register_kv_allocators(register: Register) -> None:
    """Register KV-cache allocator classes (kind ``kv_allocator``).

    See :class:`tickgate.interfaces.KvAllocator`. Selected by
    ``kv_allocator.name`` in a policy file; schedulers build their allocator
    through :meth:`tickgate.interfaces.BuildContext.kv_allocator`.
    """


@spec("admission")
def register_admission_policies(register: Register) -> None:
    """Register admission-policy classes (kind ``admission``).

    See :class:`tickgate.interfaces.AdmissionPolicy`. Selected by
    ``admission.name`` in a policy file.
    """


@spec("timing_model")
def register_timing_models(register: Register) -> None:
    """Register timing-model classes (kind ``timing_model``).

    A timing model prices an engine step in ms from what the step does, and a
    span of identical decode steps in one call. See
    :class:`tickgate.interfaces.TimingModel`. Selected by ``timing.name`` in a
    policy file (the short spelling, the four coefficients directly under
    ``timing:``, means ``linear``); built with ``build(options)``.
    """


@spec("backend_mirror")
def register_backend_mirrors(register: Register) -> None:
    """Register readers of an engine's native output files (kind ``backend_mirror``).

    See :class:`tickgate.interfaces.BackendMirror`: ``sniff`` says whether a
    file looks like this format, ``read`` turns it into neutral observations.
    Used by ``tickgate normalize`` and ``tickgate gate --baseline/--candidate``.
    """


@spec("evidence_parser")
def register_evidence_parsers(register: Register) -> None:
    """Register streaming-evidence parsers (kind ``evidence_parser``).

    See :class:`tickgate.interfaces.EvidenceParser`: turns a token stream
    capture (SSE chunks, token event logs) into per-request streaming evidence.
    """


@spec("gate_signal")
def register_gate_signals(register: Register) -> None:
    """Register release-gate signals (kind ``gate_signal``).

    See :class:`tickgate.interfaces.GateSignal`. Each entry of a gate policy's
    ``signals`` list names one signal and gives its options.
    """


@spec("workload_reader")
def register_workload_readers(register: Register) -> None:
    """Register workload readers (kind ``workload_reader``).

    See :class:`tickgate.interfaces.WorkloadReader`: streams requests out of a
    trace format (Mooncake JSONL, Azure CSV, ...). Used by ``tickgate import``
    and ``tickgate replay --input-format``.
    """


@spec("router")
def register_routers(register: Register) -> None:
    """Register router classes (kind ``router``).

    See :class:`tickgate.interfaces.routing.Router`: picks the replica of a fleet's pool
    that serves each request. Selected by ``cluster.router.name`` (or a pool's
    ``router``) in a policy file; built with ``build(options, RouterContext)``.
    """


@spec("autoscaler")
def register_autoscalers(register: Register) -> None:
    """Register autoscaler classes (kind ``autoscaler``).

    See :class:`tickgate.interfaces.autoscaling.Autoscaler`: recommends how many replicas
    each pool of a fleet should have, every ``interval_s``. Selected by
    ``cluster.autoscaler.name`` in a policy file; built per pool with
    ``build(options, AutoscalerContext)``.
    """


@spec("command")
def register_commands(register: Register) -> None:
    """Register extra ``tickgate`` subcommands (kind ``command``): click commands
    or groups whose ``name`` becomes the subcommand (e.g. ``conformance``).
    They are loaded only when invoked or when ``tickgate --help`` lists them.
    """


@spec("conformance")
def register_conformance_checks(register: Register) -> None:
    """Register engine conformance checks (kind ``conformance``): click commands
    whose ``name`` (an engine: ``vllm``, ``sglang``) becomes ``tickgate
    conformance NAME``. Build them with :func:`tickgate.conformance_command`, which
    compares a mirror with a recorded run of the real engine step by step.
    """


def hook_kinds(module: ModuleType | None = None) -> dict[str, str]:
    """Hook name -> plugin kind for every spec in ``module`` (this one by
    default), in the order the module defines them (its namespace order): the order ``tickgate plugins``
    lists kinds in. Read from the specs, never from a hand-kept list, so a
    spec added above is loaded and checked like the others.

    A ``@hookspec`` without a kind (plain pluggy marker) is a mistake in
    tickgate itself and fails loudly here rather than being skipped.
    """
    module = module or sys.modules[__name__]
    kinds: dict[str, str] = {}
    for name, value in vars(module).items():
        if not inspect.isfunction(value) or not hasattr(value, "tickgate_spec"):
            continue
        kind = getattr(value, KIND_ATTRIBUTE, None)
        if not isinstance(kind, str) or not kind:
            raise TypeError(f'hook spec {name} declares no plugin kind: decorate it with @spec("<kind>")')
        kinds[name] = kind
    return kinds


#: hook name -> plugin kind, derived from the specs above (:func:`hook_kinds`).
HOOK_KINDS: dict[str, str] = hook_kinds()
