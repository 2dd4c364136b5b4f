"""The replay/fleet choice: a policy with a ``cluster`` section replays on a fleet, any other on one
engine (:func:`tickgate.replay.run.replay_engine`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..host.policy import Policy
from ..interfaces import Request
from ..replay.report import DETAIL_LIMIT
from ..replay.run import replay_engine


def replay(
    requests: Iterable[Request],
    policy: Policy,
    *,
    trace_path: Path | str | None = None,
    inputs: dict[str, Any] | None = None,
    detail_limit: int = DETAIL_LIMIT,
    prefix_block_size: int | None = None,
    sidecar: bool = False,
    max_concurrency: int | None = None,
    kv_events_path: Path | str | None = None,
    extra_sinks: Iterable[Any] = (),
) -> dict[str, Any]:
    """Run ``requests`` through the policy's scheduler, or its fleet; return the report.

    ``prefix_block_size`` and ``max_concurrency`` default to the workload header's (``inputs``:
    ``block_size``, ``max_concurrency``); every other argument is
    :func:`tickgate.replay.run.replay_engine`'s.
    """
    if prefix_block_size is None and inputs:
        prefix_block_size = inputs.get("block_size")
    if max_concurrency is None and inputs:
        max_concurrency = inputs.get("max_concurrency")
    if "cluster" in policy.data:
        return _replay_fleet(
            requests,
            policy,
            trace_path=trace_path,
            inputs=inputs,
            detail_limit=detail_limit,
            prefix_block_size=prefix_block_size,
            max_concurrency=max_concurrency,
            sidecar=sidecar,
            kv_events_path=kv_events_path,
            extra_sinks=extra_sinks,
        )
    return replay_engine(
        requests,
        policy,
        trace_path=trace_path,
        inputs=inputs,
        detail_limit=detail_limit,
        prefix_block_size=prefix_block_size,
        sidecar=sidecar,
        max_concurrency=max_concurrency,
        kv_events_path=kv_events_path,
        extra_sinks=extra_sinks,
    )


def _replay_fleet(
    requests: Iterable[Request],
    policy: Policy,
    *,
    trace_path: Path | str | None,
    inputs: dict[str, Any] | None,
    detail_limit: int,
    prefix_block_size: int | None,
    max_concurrency: int | None,
    sidecar: bool,
    kv_events_path: Path | str | None,
    extra_sinks: Iterable[Any],
) -> dict[str, Any]:
    """A policy with a ``cluster`` section: its fleet (:mod:`tickgate.fleet`)."""
    from ..fleet import fleet_spec, replay_fleet
    from ..util.errors import InputError

    spec = fleet_spec(policy)
    assert spec is not None
    if max_concurrency is not None:
        raise InputError(
            policy.path,
            "closed-loop clients (max_concurrency) are not modelled for fleets yet: "
            "replay the workload's arrivals open-loop, or one replica",
            **policy.locate("cluster"),
        )
    inputs = dict(inputs or {})
    inputs["policy"] = policy.source or policy.path
    assert policy.timing is not None  # fleet_spec refuses a fleet without one
    inputs["timing"] = policy.timing.to_json()
    return replay_fleet(
        requests,
        policy,
        spec,
        inputs=inputs,
        prefix_block_size=prefix_block_size,
        detail_limit=detail_limit,
        trace_path=trace_path,
        sidecar=sidecar,
        kv_events_path=kv_events_path,
        client_sinks=list(extra_sinks),
    )


def check_buildable(policy: Policy) -> None:
    """Build what a replay under ``policy`` builds before its first request, and drop it: a
    fleet's spec, every replica's engine and the routers (:func:`tickgate.fleet.fleet_spec`,
    :class:`tickgate.fleet.Fleet`), or the one scheduler. ``tickgate validate`` runs this, so
    that what replay refuses about a policy, validate refuses, in the same words."""
    if "cluster" in policy.data:
        from ..fleet import Fleet, fleet_spec

        spec = fleet_spec(policy)
        assert spec is not None
        fleet = Fleet(spec, policy, prefix_block_size=None, detail_limit=DETAIL_LIMIT)
        for engine in fleet.engines:
            engine.close()
    elif policy.selection("scheduler") is not None:
        from ..interfaces import Clock
        from ..replay.engine import build_scheduler

        build_scheduler(policy, Clock())
