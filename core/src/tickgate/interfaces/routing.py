"""The router interface: which replica of a pool serves a request.

A fleet (a policy's ``cluster:`` section, docs/fleets.md) puts replicas behind
a router plugin (kind ``router``, hook ``register_routers``). The fleet driver
calls :meth:`Router.route` once per request, at the request's arrival on the
fleet's clock, with a view of every replica of the pool in fleet order; the
router returns the index in that sequence of the one it picks. In a fleet that
scales (``cluster.autoscaler``, docs/autoscaling.md) the sequence holds only the
replicas ready at that moment, so its length changes; :attr:`ReplicaView.position`
stays the replica's own, and new replicas get new positions (possibly beyond
:attr:`RouterContext.replicas`): a router keeping state per replica keys it by
``position``. What a router may read of a
replica is :class:`ReplicaView`: counts the driver keeps exactly (routed and
unfinished requests, the running batch of the replica's last step, KV pages in
use) and the replica's cached prefix for the request (from the replica's KV
events when its scheduler publishes them, else the driver's record of what it
routed there).

Determinism is the router's job too: a router that samples owns a
``random.Random`` seeded from :attr:`RouterContext.seed`, never ``hash()`` of a
string or the order of a set; ties are broken by a rule it documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import attrs

from .model import Request, RequestOutcome
from .plugin import Plugin

__all__ = ["ReplicaView", "Router", "RouterContext"]


class ReplicaView(Protocol):
    """What a router sees of one replica (or data-parallel rank) of a pool."""

    #: position in the pool (what :meth:`Router.route` returns) and the fleet's name for it
    position: int
    name: str
    pool: str

    # the counts are read-only (the fleet's replicas compute them from their ranks)
    @property
    def in_flight(self) -> int:
        """Requests routed to it that have not finished (waiting + running)."""

    @property
    def routed(self) -> int:
        """Requests it has been routed in all."""

    @property
    def running(self) -> int:
        """Its running batch: the ``active`` count of its last step, at most ``in_flight``."""

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens its prefills have computed so far (the driver adds up its records)."""

    @property
    def waiting(self) -> int:
        """Routed, unfinished and not running: ``in_flight - running``."""

    def kv_used_pages(self) -> int: ...

    def kv_capacity_pages(self) -> int: ...

    def cached_prefix_tokens(self, request: Request) -> int:
        """Leading prompt tokens of ``request`` the replica holds in its prefix cache."""


@attrs.frozen
class RouterContext:
    """What a router is built with besides its options."""

    #: the pool it routes for, and how many replicas that pool has (a pool that scales: at
    #: most this many at once, its ``max_replicas``)
    pool: str
    replicas: int
    #: the fleet's seed (``cluster.seed``, default 0): the only source of randomness
    seed: int = 0


class Router(Plugin):
    """Picks a replica for each request.

    ``uses_replica_state``: whether :meth:`route` reads the views at all. A
    router that does not (``round-robin``) is asked ahead of time, which lets
    every replica fast-forward up to its own next request instead of stopping
    at every request the fleet receives (docs/fleets.md, "Cost").
    ``reads_cached_prefixes``: whether it asks for the replicas' cached prefixes
    (without it, ``cached_prefix_tokens`` answers 0).
    """

    uses_replica_state: ClassVar[bool] = True
    #: whether :meth:`route` asks :meth:`ReplicaView.cached_prefix_tokens`: only then
    #: does the fleet keep the record of what each replica caches (it costs a few
    #: dictionary operations per prefix block of every request)
    reads_cached_prefixes: ClassVar[bool] = False

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: RouterContext) -> Router:
        raise NotImplementedError

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        """The position (``0 <= p < len(replicas)``) of the replica that serves ``request``."""
        raise NotImplementedError

    def finished(self, outcome: RequestOutcome, position: int) -> None:
        """A request this router sent to ``position`` completed or was rejected."""
