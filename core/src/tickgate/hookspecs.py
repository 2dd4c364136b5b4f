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

Built-in plugins are registered through these same hooks and the same
``tickgate`` entry-point group that third-party packages use.
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

hookspec = pluggy.HookspecMarker("tickgate")
hookimpl = pluggy.HookimplMarker("tickgate")

Register = Callable[[Any], None]


@hookspec
def register_schedulers(register: Register) -> None:
    """Register scheduler classes (kind ``scheduler``).

    A scheduler owns the semantics of one engine step: which waiting requests
    are admitted, how many prefill tokens each gets, who decodes and who is
    preempted. See :class:`tickgate.interfaces.Scheduler` for the protocol.
    Selected by ``scheduler.name`` in a policy file.
    """


@hookspec
def register_kv_allocators(register: Register) -> None:
    """Register KV-cache allocator classes (kind ``kv_allocator``).

    See :class:`tickgate.interfaces.KvAllocator`. Selected by
    ``kv_allocator.name`` in a policy file; schedulers build their allocator
    through :meth:`tickgate.interfaces.BuildContext.kv_allocator`.
    """


@hookspec
def register_admission_policies(register: Register) -> None:
    """Register admission-policy classes (kind ``admission``).

    See :class:`tickgate.interfaces.AdmissionPolicy`. Selected by
    ``admission.name`` in a policy file.
    """


@hookspec
def register_backend_mirrors(register: Register) -> None:
    """Register readers of an engine's native output files (kind ``backend_mirror``).

    See :class:`tickgate.interfaces.BackendMirror`: ``sniff`` says whether a
    file looks like this format, ``read`` turns it into neutral observations.
    Used by ``tickgate normalize`` and ``tickgate gate --baseline/--candidate``.
    """


@hookspec
def register_evidence_parsers(register: Register) -> None:
    """Register streaming-evidence parsers (kind ``evidence_parser``).

    See :class:`tickgate.interfaces.EvidenceParser`: turns a token stream
    capture (SSE chunks, token event logs) into per-request streaming evidence.
    """


@hookspec
def register_gate_signals(register: Register) -> None:
    """Register release-gate signals (kind ``gate_signal``).

    See :class:`tickgate.interfaces.GateSignal`. Each entry of a gate policy's
    ``signals`` list names one signal and gives its options.
    """


@hookspec
def register_workload_readers(register: Register) -> None:
    """Register workload readers (kind ``workload_reader``).

    See :class:`tickgate.interfaces.WorkloadReader`: streams requests out of a
    trace format (Mooncake JSONL, Azure CSV, ...). Used by ``tickgate import``
    and ``tickgate replay --input-format``.
    """


@hookspec
def register_commands(register: Register) -> None:
    """Register extra ``tickgate`` subcommands (kind ``command``): click commands
    or groups whose ``name`` becomes the subcommand (e.g. ``conformance``).
    They are loaded only when invoked or when ``tickgate --help`` lists them.
    """


#: hook name -> plugin kind, in the order ``tickgate plugins`` lists them.
HOOK_KINDS: dict[str, str] = {
    "register_schedulers": "scheduler",
    "register_kv_allocators": "kv_allocator",
    "register_admission_policies": "admission",
    "register_backend_mirrors": "backend_mirror",
    "register_evidence_parsers": "evidence_parser",
    "register_gate_signals": "gate_signal",
    "register_workload_readers": "workload_reader",
    "register_commands": "command",
}
