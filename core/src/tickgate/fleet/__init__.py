"""Fleets: replicas behind a router on one clock (docs/fleets.md).

:func:`replay_fleet` is what ``tickgate replay`` runs for a policy with a
``cluster`` section: :mod:`.spec` checks and resolves the section, :mod:`.driver`
runs the replicas, :mod:`.report` rolls them up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..host.policy import Policy
from ..interfaces.model import Request, RequestOutcome, TickRecord
from ..replay.report import DETAIL_LIMIT, SummarySink
from ..util.atomic import atomic_writer
from ..util.jsonio import stdlib_line
from .driver import Fleet
from .report import fleet_report, replica_report
from .spec import FleetSpec, fleet_spec

__all__ = ["Fleet", "FleetSpec", "fleet_spec", "replay_fleet"]


class _ReplicaTrace:
    """A fleet's ``--trace``: every engine's records, one JSON line each, named by engine."""

    def __init__(self, fh: Any, name: str) -> None:
        self.fh = fh
        self.name = name

    def arrival(self, request: Request) -> None:
        pass

    def outcome(self, outcome: RequestOutcome) -> None:
        pass

    def record(self, record: TickRecord) -> None:
        self.fh.write(stdlib_line({"replica": self.name, **record.to_json()}) + "\n")


def replay_fleet(
    requests: Iterable[Request],
    policy: Policy,
    spec: FleetSpec,
    *,
    inputs: dict[str, Any],
    prefix_block_size: int | None,
    detail_limit: int = DETAIL_LIMIT,
    trace_path: Path | str | None = None,
    keep: list[Any] | None = None,
    sidecar: bool = False,
    kv_events_path: Path | str | None = None,
    client_sinks: list[Any] | None = None,
) -> dict[str, Any]:
    """Replay ``requests`` through the fleet; the fleet's report. ``sidecar``: each
    engine's fingerprint and summary in a forked child (:mod:`tickgate.replay.sidecar`;
    the same report). ``keep``: a list the built :class:`Fleet` and the engines' own
    reports are appended to (tests). ``kv_events_path``: every engine's KV-cache events,
    in vLLM's msgpack batches named by replica and rank, written atomically.
    ``client_sinks``: more sinks given every request's arrival at the fleet and its
    outcome as the client sees it (``tickgate plan``'s goodput; no records: those
    are per engine)."""
    from ..replay.kv_events_out import KvEventWriter

    client = SummarySink(detail_limit=detail_limit)
    writer = None

    clients = [client, *(client_sinks or ())]

    def arrivals() -> Iterable[Request]:
        for r in requests:
            for sink in clients:
                sink.arrival(r)
            yield r

    with contextlib.ExitStack() as stack:
        if kv_events_path is not None:
            writer = KvEventWriter(stack.enter_context(atomic_writer(kv_events_path, binary=True)))
        fleet = Fleet(
            spec,
            policy,
            prefix_block_size=prefix_block_size,
            detail_limit=detail_limit,
            sidecar=sidecar,
            kv_writer=writer,
        )
        hooks: list[Any] = [lambda e: stack.callback(e.close)]
        if trace_path is not None:
            fh = stack.enter_context(atomic_writer(trace_path))
            hooks.append(lambda e: e.sinks.append(_ReplicaTrace(fh, e.name)))
        for hook in hooks:  # the engines built now, and those a pool that scales builds later
            for e in fleet.engines:
                hook(e)
            fleet.engine_hooks.append(hook)
        fleet.run(arrivals(), [sink.outcome for sink in clients], source=inputs.get("workload"))
        for e in fleet.engines:
            e.finish()
    inputs = dict(inputs)
    replicas = [replica_report(fleet, i, inputs) for i in range(len(fleet.engines))]
    inputs["cluster"] = spec.to_json()
    report = fleet_report(fleet, client, inputs, replicas)
    if fleet.scaling is not None:
        report["autoscaling"] = fleet.scaling.to_json(fleet.end_ms())
    if writer is not None:
        report["kv_events"] = writer.counts.to_json()
    if keep is not None:
        keep.extend([fleet, replicas])
    return report
