"""The built-in routers (kind ``router``; docs/fleets.md, "Routers").

Each states its rule and the source it follows. Ties never depend on dict or
set order: the lowest cost wins, and among equal costs the first found scanning
from a start position that advances by one after every decision (vLLM's
rotating tie-break, PR #47420 in ``vllm/v1/engine/core_client.py``), so equal
replicas take turns instead of the first one taking everything.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..interfaces.model import Request, RequestOutcome
from ..interfaces.routing import ReplicaView, Router, RouterContext

__all__ = ["LeastLoaded", "PowerOfTwo", "PrefixAware", "RoundRobin", "SessionAffinity"]

_NO_OPTIONS: Mapping[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}


class _Rotating:
    """The lowest of a cost per position, ties to the first from a rotating start."""

    def __init__(self) -> None:
        self.start = 0

    def pick(self, costs: Sequence[float]) -> int:
        n = len(costs)
        start = self.start % n
        best = start
        low = costs[start]
        for k in range(1, n):
            p = (start + k) % n
            if costs[p] < low:
                best, low = p, costs[p]
        self.start = start + 1
        return best


class RoundRobin(Router):
    name = "round-robin"
    description = "each request to the next replica in fleet order (vLLM's toy disaggregation proxy, BLIS)"
    options_schema = _NO_OPTIONS
    uses_replica_state = False

    def __init__(self, n: int) -> None:
        self.n = n
        self.next = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: RouterContext) -> RoundRobin:
        return cls(ctx.replicas)

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        p = self.next % len(replicas)  # a scaled pool's list of ready replicas changes length
        self.next = (p + 1) % len(replicas)
        return p


class LeastLoaded(Router):
    name = "least-loaded"
    description = (
        "fewest waiting_weight x waiting + running requests (vLLM's DP balancer counts, rotating ties)"
    )
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "waiting_weight": {
                "type": "number",
                "minimum": 0,
                "maximum": 1000,
                "default": 1,
                "description": "weight of a waiting request against a running one: 1 counts requests in flight "
                "(waiting + running), 4 is vLLM's classic DP score",
            }
        },
    }

    def __init__(self, waiting_weight: float) -> None:
        self.w = waiting_weight
        self.ties = _Rotating()

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: RouterContext) -> LeastLoaded:
        return cls(float(options.get("waiting_weight", 1)))

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        w = self.w
        return self.ties.pick([w * r.waiting + r.running for r in replicas])


class PowerOfTwo(Router):
    name = "power-of-two"
    description = "two replicas drawn at random (seeded), the one with fewer requests in flight"
    options_schema = _NO_OPTIONS

    def __init__(self, seed: int, pool: str) -> None:
        # a str seed goes through SHA-512 in random.seed: the same stream in every process
        self.rng = random.Random(f"power-of-two:{pool}:{seed}")

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: RouterContext) -> PowerOfTwo:
        return cls(ctx.seed, ctx.pool)

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        n = len(replicas)
        if n == 1:
            return 0
        a, b = self.rng.sample(range(n), 2)
        return b if replicas[b].in_flight < replicas[a].in_flight else a


class SessionAffinity(Router):
    name = "session-affinity"
    description = (
        "a stable hash of the request's tenant (or lane) picks its replica; least-loaded without one"
    )
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "key": {
                "enum": ["tenant", "lane"],
                "default": "tenant",
                "description": "the request field that names the session",
            }
        },
    }

    def __init__(self, key: str) -> None:
        self.key = key
        self.fallback = LeastLoaded(1.0)

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: RouterContext) -> SessionAffinity:
        return cls(options.get("key", "tenant"))

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        session = getattr(request, self.key)
        if session is None:
            return self.fallback.route(request, replicas)
        # BLAKE2b, not hash(): str hashes are salted per process (PYTHONHASHSEED)
        digest = hashlib.blake2b(session.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % len(replicas)


class PrefixAware(Router):
    """Dynamo's KV router cost, in tokens (``DefaultWorkerSelector`` /
    ``DefaultWorkerScorer::worker_logit``; docs/design/fleets-sources.md §2):

        cost = overlap_weight * (pending_prefill + uncached) + active + uncached

    per replica, where ``uncached`` is the request's prompt tokens beyond the
    longest prefix the replica holds (its KV events, or with ``prefix_source:
    routed`` or a scheduler without them, what was routed there), ``pending_prefill`` the prompt
    tokens routed there not yet computed (routed uncached tokens less the tokens its prefills computed) and
    ``active`` the prompt tokens of its requests in flight (Dynamo's active
    blocks, ``assume_kv_reuse``: cached blocks are shared, not new). Dynamo
    divides by the block size; one size for the whole pool leaves the argmin
    unchanged. Temperature 0 (Dynamo's default): the lowest cost, rotating ties.
    """

    name = "prefix-aware"
    description = "Dynamo's KV-router cost: prefill tokens not cached (weighted) + active tokens, lowest wins"
    reads_cached_prefixes = True
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "overlap_weight": {
                "type": "number",
                "minimum": 0,
                "maximum": 1000,
                "default": 1,
                "description": "weight of the prefill work against the decode load (Dynamo's "
                "--router-kv-overlap-score-weight, default 1)",
            },
            "prefix_source": {
                "enum": ["events", "routed"],
                "default": "events",
                "description": "events: each replica's KV events (schedulers that record them; the "
                "others as 'routed'); routed: what was routed there (Dynamo without events)",
            },
        },
    }

    def __init__(self, n: int, overlap_weight: float, prefix_source: str = "events") -> None:
        self.w = overlap_weight
        self.prefix_source = prefix_source  # read by the fleet: where cached_prefix_tokens looks
        self.routed_uncached = [0] * n
        self.active = [0] * n
        self.ties = _Rotating()

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: RouterContext) -> PrefixAware:
        return cls(
            ctx.replicas, float(options.get("overlap_weight", 1)), options.get("prefix_source", "events")
        )

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        w = self.w
        prompt = request.prompt_tokens
        costs = []
        uncached_at = []
        routed_uncached, active = self.routed_uncached, self.active
        for r in replicas:
            p = r.position
            if p >= len(active):  # a replica a scaled pool started after the router was built
                routed_uncached.extend([0] * (p + 1 - len(active)))
                active.extend([0] * (p + 1 - len(active)))
            uncached = prompt - min(r.cached_prefix_tokens(request), prompt)
            pending = routed_uncached[p] - r.prefilled_tokens
            costs.append(w * ((pending if pending > 0 else 0) + uncached) + active[p] + uncached)
            uncached_at.append(uncached)
        chosen = self.ties.pick(costs)
        p = replicas[chosen].position  # the list holds only the ready replicas of a scaled pool
        routed_uncached[p] += uncached_at[chosen]
        active[p] += prompt
        return chosen

    def finished(self, outcome: RequestOutcome, position: int) -> None:
        self.active[position] -= outcome.prompt_tokens
