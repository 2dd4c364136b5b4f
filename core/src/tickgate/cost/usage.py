"""What replicas used: GPUs, from when each was provisioned to when it stopped.

A fleet that scales has one :class:`ReplicaUsage` per replica it ran, read from its report's
``autoscaling`` section (:func:`tickgate.cost.report.recorded_usage`; provisioning counts: a
replica being provisioned is billed and serves nothing). A static fleet's is
:func:`static_usage`: every replica of every pool from 0 to the end of the replay, which
:class:`UsageSink` finds (the last request's finish).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..util.errors import TickgateError
from .shape import PoolShape, pool_shapes

__all__ = ["ReplicaUsage", "UsageSink", "static_usage"]


def _non_negative(instance: Any, attribute: Any, value: float) -> None:
    if not value >= 0:  # also refuses NaN
        raise ValueError(f"{attribute.name} must be >= 0, not {value!r}")


@attrs.frozen
class ReplicaUsage:
    """One replica's GPUs over one interval of the replay's clock (ms): ``gpus`` GPUs of kind
    ``gpu`` (as the policy names it; ``""`` when it names none) from ``start_ms`` (provisioning
    began) to ``stop_ms`` (it stopped). A replica stopped and started again is two records."""

    pool: str
    replica: str
    gpu: str
    gpus: int
    start_ms: float = attrs.field(validator=_non_negative)
    stop_ms: float = attrs.field(validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"replica {self.replica!r}: gpus must be >= 1, not {self.gpus}")
        if self.stop_ms < self.start_ms:
            raise ValueError(
                f"replica {self.replica!r}: stop_ms {self.stop_ms} is before start_ms {self.start_ms}"
            )

    @property
    def gpu_ms(self) -> float:
        return self.gpus * (self.stop_ms - self.start_ms)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplicaUsage:
        return cls(
            pool=str(data["pool"]),
            replica=str(data["replica"]),
            gpu=str(data["gpu"]),
            gpus=int(data["gpus"]),
            start_ms=float(data["start_ms"]),
            stop_ms=float(data["stop_ms"]),
        )


def static_usage(
    document: Mapping[str, Any] | Sequence[PoolShape], stop_ms: float, start_ms: float = 0.0
) -> list[ReplicaUsage]:
    """Every replica of a static configuration (a policy document, or its
    :func:`~tickgate.cost.shape.pool_shapes`) from ``start_ms`` to ``stop_ms``, named as the
    fleet names them (``replica-<i>`` in a fleet of one pool, ``<pool>-<i>`` otherwise)."""
    shapes = pool_shapes(document) if isinstance(document, Mapping) else tuple(document)
    single = len(shapes) == 1 and shapes[0].pool == "default"
    return [
        ReplicaUsage(
            pool=shape.pool,
            replica=f"replica-{i}" if single else f"{shape.pool}-{i}",
            gpu=shape.gpu or "",
            gpus=shape.gpus_per_replica,
            start_ms=start_ms,
            stop_ms=stop_ms,
        )
        for shape in shapes
        for i in range(shape.replicas)
    ]


class UsageSink:
    """A replay sink (``replay(..., extra_sinks=[...])``) that sees every outcome, not the report's
    first ``--detail-limit``: the replay's end (the last finish on the replay's clock, ms) and the
    tokens served (completed requests' output tokens, and their prompt plus output tokens)."""

    def __init__(self) -> None:
        self.end_ms = 0.0
        self.output_tokens = 0
        self.total_tokens = 0
        self.timed = True

    def arrival(self, request: Any) -> None:
        pass

    def record(self, record: Any) -> None:
        pass

    def outcome(self, o: Any) -> None:
        last = o.finished_ms if o.finished_ms is not None else o.arrival_ms
        if last is None:
            self.timed = False
        else:
            self.end_ms = max(self.end_ms, float(last))
        if o.status == "completed":
            self.output_tokens += o.output_tokens
            self.total_tokens += o.prompt_tokens + o.output_tokens

    def check_timed(self) -> None:
        if not self.timed:
            raise TickgateError("cost needs a timed replay (a timing section in the policy)")
