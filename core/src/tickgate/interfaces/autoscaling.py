"""The autoscaler interface: how many replicas a pool should have next.

A fleet whose policy has ``cluster.autoscaler`` (docs/autoscaling.md) builds one
autoscaler plugin (kind ``autoscaler``, hook ``register_autoscalers``) per pool and
asks it every ``interval_s`` of simulated time, with the pool's signals at that
moment (:class:`PoolSignals`), how many replicas the pool should have
(:meth:`Autoscaler.decide`). The fleet owns everything else, as a Kubernetes
controller does for an HPA's recommendation: the ``min_replicas`` /
``max_replicas`` bounds, the replica lifecycle (provisioning, model load and
warm-up before a new replica serves; draining before one stops) and the report
of every decision. An autoscaler only recommends.

Signals are what a real autoscaler can read: the replicas' queue depths, running
batches and KV usage now (vLLM's ``vllm:num_requests_waiting``,
``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``, summed or averaged
over the ready replicas), and over the last ``window_s``: arrivals and their
token mix, and the TTFT / ITL percentiles of the requests that finished in it.

Determinism is the plugin's job too: no wall clock; a plugin that samples owns a
``random.Random`` seeded from :attr:`AutoscalerContext.seed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .plugin import Plugin

__all__ = ["Autoscaler", "AutoscalerContext", "PoolSignals", "ScaleDecision"]

#: metric names :meth:`PoolSignals.metric` answers, and whether each is a total over the
#: ready replicas (an HPA ``AverageValue`` target divides it by them) or a value as it is
TOTALS = ("waiting", "running", "in_flight", "arrival_rate")
VALUES = (
    "kv_usage",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_p95_ms",
    "itl_p99_ms",
)
METRICS = TOTALS + VALUES


@attrs.frozen
class PoolSignals:
    """One pool at one decision time."""

    pool: str
    #: ``mixed``, ``prefill`` or ``decode``
    role: str
    now_ms: float
    window_ms: float
    #: replicas the router sends requests to
    ready: int
    #: replicas provisioning, loading weights or warming up (they count, as a Deployment's
    #: replicas do, but serve nothing yet)
    starting: int
    #: replicas taken out of routing that still finish their requests
    draining: int
    #: over the ready replicas, now
    waiting: int
    running: int
    kv_usage: float
    #: requests that reached the pool in the window, per second, and their mean lengths
    arrivals: int
    arrival_rate: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    #: percentiles (``p50``, ``p90``, ``p95``, ``p99``) of the requests that finished in the
    #: window: TTFT, and each request's mean inter-token latency; empty when none finished
    ttft_ms: Mapping[str, float] = attrs.field(factory=dict)
    itl_ms: Mapping[str, float] = attrs.field(factory=dict)

    @property
    def current(self) -> int:
        """The replicas the pool has asked for: ready and starting (not draining)."""
        return self.ready + self.starting

    def metric(self, name: str) -> float | None:
        """A metric by name (:data:`METRICS`); None when the window has no figure for it."""
        if name == "in_flight":
            return float(self.waiting + self.running)
        if name in ("waiting", "running", "arrival_rate", "kv_usage"):
            return float(getattr(self, name))
        family, _, rest = name.partition("_")
        if family in ("ttft", "itl") and rest.endswith("_ms"):
            return (self.ttft_ms if family == "ttft" else self.itl_ms).get(rest[: -len("_ms")])
        raise KeyError(name)


@attrs.frozen
class ScaleDecision:
    """What an autoscaler wants: ``replicas`` for the pool, and why (the report keeps
    ``reason``, the ``metric`` it acted on and that metric's ``value``)."""

    replicas: int
    reason: str
    metric: str | None = None
    value: float | None = None


@attrs.frozen
class AutoscalerContext:
    """What an autoscaler is built with besides its options: one per pool."""

    pool: str
    role: str
    min_replicas: int
    max_replicas: int
    #: how often :meth:`Autoscaler.decide` is called, and the signals' window
    interval_ms: float
    window_ms: float
    #: how long a replica takes from the decision to serving (provisioning + load + warm-up)
    startup_ms: float
    #: the pool's timing model (``step_ms(prefill_tokens, decode_seqs, context_tokens)``)
    timing: Any
    #: the pool's scheduler options as the policy gives them (batch caps)
    scheduler_options: Mapping[str, Any]
    #: the fleet's seed (``cluster.seed``): the only source of randomness
    seed: int = 0
    #: a replica's data-parallel ranks (each its own scheduler, batch and KV pool), and the KV
    #: tokens one rank holds (its scheduler's pages x tokens per page; None when it does not say)
    ranks: int = 1
    kv_tokens_per_rank: int | None = None


class Autoscaler(Plugin):
    """Recommends a pool's replica count at every decision time."""

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AutoscalerContext) -> Autoscaler:
        raise NotImplementedError

    def decide(self, signals: PoolSignals) -> ScaleDecision:
        """The replicas the pool should have (the fleet clamps to its bounds)."""
        raise NotImplementedError
