"""The engine-side plugin contract: the clock and horizon a scheduler is given, the
scheduler, KV allocator and admission-policy bases, and what they are built with."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, overload

import attrs

from .kv_events import KvEvent
from .model import Request, RequestOutcome, TickRecord
from .plugin import Plugin
from .timing import TimingModel


@attrs.define
class Clock:
    """The engine's clock, shared with the scheduler: current step and its start in ms.

    ``idle_ms`` is the time the engine jumped over while nothing was queued or
    running; busy time is ``now_ms - idle_ms``. Both are computed from the
    clock alone, so a scheduler that fast-forwards a span gives the same
    figures, to the last bit, as one that steps through it.
    """

    tick: int = 0
    now_ms: float = 0.0
    idle_ms: float = 0.0


@attrs.define
class Horizon:
    """How far a scheduler may fast-forward from the current step.

    ``max_ticks``: the number of steps before the next arrival (None: no more
    arrivals). ``until_ms``: the time of the next arrival when arrivals are
    timed in ms (a span must end before it). A span never crosses an arrival.
    Read-only for schedulers: the engine passes the same object to every step
    until the next arrival.
    """

    max_ticks: int | None = None
    until_ms: float | None = None


@attrs.define
class BuildContext:
    """What a scheduler gets besides its own options: factories for the
    collaborators the policy file selected, the shared clock and the timing
    model. A scheduler that knows its KV geometry asks for its allocator and
    admission policy through :meth:`kv_allocator` and :meth:`admission`."""

    clock: Clock
    timing: TimingModel | None
    make_kv_allocator: Any  # (capacity_pages, page_size, default_name) -> KvAllocator
    make_admission: Any  # (AdmissionContext, default_name) -> AdmissionPolicy | None
    #: tokens per entry of ``Request.prefix_blocks`` (the workload's ``block_size``,
    #: or the importer's ``--block-size``); None when the workload does not say.
    prefix_block_size: int | None = None

    def kv_allocator(self, capacity: int, page_size: int, default: str = "paged") -> KvAllocator:
        return self.make_kv_allocator(capacity, page_size, default)

    @overload
    def admission(self, actx: AdmissionContext, default: str = "priority-fcfs") -> AdmissionPolicy: ...
    @overload
    def admission(self, actx: AdmissionContext, default: None) -> AdmissionPolicy | None: ...
    def admission(
        self, actx: AdmissionContext, default: str | None = "priority-fcfs"
    ) -> AdmissionPolicy | None:
        """The policy file's admission policy, else ``default`` (None only when ``default`` is None
        and the policy file names none)."""
        return self.make_admission(actx, default)


class Scheduler(Plugin):
    """Owns the step semantics of one engine.

    The engine loop calls, in order, for each step: :meth:`add` for every
    request that arrives at this step, then :meth:`step`. It stops when there
    are no more arrivals and :meth:`has_work` is false. Outcomes (completions
    and rejections) are collected with :meth:`pop_outcomes` after every step.

    ``uses_admission_policy``: whether the policy file's ``admission`` section
    means anything to this scheduler; if False a policy that sets one is refused.
    ``supported_admission``: names of admission policies that compose with this
    scheduler (None = all).
    """

    uses_admission_policy: ClassVar[bool] = True
    supported_admission: ClassVar[frozenset[str] | None] = None
    uses_kv_allocator: ClassVar[bool] = True
    #: why a scheduler that does not use an admission policy orders its own queue:
    #: quoted in the error for a policy file that sets ``admission:`` anyway
    admission_note: ClassVar[str] = "engine semantics"
    #: whether a record's ``decoded`` lists every request that samples a token in
    #: its step. True (``seed``, ``vllm-v1``): the step that samples a request's
    #: first token is listed too (the seed's first decode step, the end of vLLM's
    #: prefill), and so is the end of a recompute after a preemption. False
    #: (``sglang``, ``trtllm``): ``decoded`` lists the requests decoding a token,
    #: not those that sample one as their prefill (or recompute) ends. The report's
    #: inter-token gaps (``latency.itl_ms``, docs/report.md) read records by it.
    decoded_lists_every_sample: ClassVar[bool] = True
    #: whether a fleet may give a replica of this scheduler data-parallel ranks
    #: (``cluster.data_parallel_size``): each rank is one instance with its own KV
    #: pool, the fleet balances and (lockstep) synchronises them; an engine mirror
    #: says yes, a toy scheduler does not
    supports_data_parallel: ClassVar[bool] = False
    #: whether it has ``add_transferred(request)``: the decode side of a
    #: disaggregated fleet, a request whose prompt KV arrives computed
    accepts_transferred_kv: ClassVar[bool] = False

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> Scheduler:
        raise NotImplementedError

    def add(self, request: Request) -> None:
        """A request arrives (before the current step is scheduled)."""
        raise NotImplementedError

    def add_transferred(self, request: Request) -> None:
        """Optional (``accepts_transferred_kv``): a request whose prompt KV a remote
        prefill computed and transferred; it arrives now, as :meth:`add` does.

        The fleet has already spent the transfer time. The scheduler queues it as
        its engine queues a request whose KV a connector loads (vLLM: NIXL's
        decode side), finds room for its prompt's KV when its turn comes, and
        from then on runs it like any other (docs/vllm.md, "Disaggregated decode
        side")."""
        raise NotImplementedError

    def step(self, horizon: Horizon) -> TickRecord:
        """Run the step at ``clock.tick`` (or a span of identical steps within
        ``horizon``) and return its record. Must make progress or raise."""
        raise NotImplementedError

    def has_work(self) -> bool:
        raise NotImplementedError

    def pop_outcomes(self) -> list[RequestOutcome]:
        """Requests that completed or were rejected since the last call."""
        raise NotImplementedError

    # Capacity figures the report uses for pressure and utilisation.
    def kv_capacity_pages(self) -> int:
        raise NotImplementedError

    def kv_used_pages(self) -> int:
        raise NotImplementedError

    def decode_slots_per_tick(self) -> int:
        """How many sequences one step can decode (utilisation denominator)."""
        raise NotImplementedError

    def extra_summary(self) -> Mapping[str, Any]:
        """Scheduler-specific totals for the report (prefix hits, preemptions, ...)."""
        return {}

    # -- optional capability: KV-cache events (tickgate.interfaces.kv_events, docs/plugins.md) --
    #: whether the scheduler implements the three methods below. False: ``tickgate
    #: replay --kv-events`` and routers that read KV events refuse it with one line.
    records_kv_events: ClassVar[bool] = False

    def enable_kv_events(self) -> None:
        """Start recording KV-cache events. Called at most once, before the first
        :meth:`step` (requests may have been added); a scheduler never asked
        records nothing and must cost nothing for the capability."""
        raise NotImplementedError

    def drain_kv_events(self) -> list[KvEvent]:
        """The events (``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``)
        recorded since the last call, in the order the engine would emit them;
        called after every step's record. Empty when nothing changed the cache."""
        raise NotImplementedError

    def prompt_block_hashes(self, request: Request) -> list[int]:
        """The hashes this scheduler's ``BlockStored`` events would carry for
        ``request``'s shareable full prompt blocks, first block first (a pure
        function of the request and the scheduler's options: a router calls it
        before routing, on any replica, and matches the leading run against each
        replica's resident set)."""
        raise NotImplementedError


class KvAllocator(Plugin):
    """Paged KV cache. Capacity is never exceeded; every page comes back.

    Owners are request ids. ``reserve`` takes pages for a new owner, ``grow``
    adds pages to an existing one, ``free`` returns all of an owner's pages.
    Allocators with a prefix cache also implement :meth:`match_prefix`.
    """

    @classmethod
    def build(cls, options: Mapping[str, Any], capacity: int, page_size: int) -> KvAllocator:
        raise NotImplementedError

    capacity: int
    page_size: int

    @property
    def used(self) -> int:
        raise NotImplementedError

    @property
    def free_pages(self) -> int:
        return self.capacity - self.used

    def can_reserve(self, pages: int) -> bool:
        return pages <= self.free_pages

    def reserve(self, owner: str, pages: int) -> None:
        raise NotImplementedError

    def grow(self, owner: str, pages: int) -> None:
        raise NotImplementedError

    def free(self, owner: str) -> int:
        raise NotImplementedError

    def held(self, owner: str) -> int:
        raise NotImplementedError

    #: True when :meth:`plan_prefix` / :meth:`reserve_prefix` share cached pages.
    has_prefix_cache: ClassVar[bool] = False

    def match_prefix(self, blocks: tuple[int, ...]) -> int:
        """Number of leading blocks already cached (0 without a prefix cache)."""
        return 0

    def plan_prefix(self, blocks: tuple[int, ...], prompt_tokens: int, pages: int) -> tuple[int, int]:
        """What reserving ``pages`` for a prompt with these prefix blocks would cost:
        ``(hit_tokens, new_pages)``. ``hit_tokens`` are leading prompt tokens already
        cached (prefill skips them); ``new_pages`` is how far ``free_pages`` drops.
        Without a prefix cache: ``(0, pages)``."""
        return 0, pages

    def reserve_prefix(self, owner: str, pages: int, blocks: tuple[int, ...], prompt_tokens: int) -> int:
        """Reserve like :meth:`reserve`, sharing cached leading pages; returns the hit tokens."""
        self.reserve(owner, pages)
        return 0

    def summary(self) -> Mapping[str, Any]:
        """Allocator totals for the report (prefix hits, evictions, ...); empty by default."""
        return {}


class AdmissionPolicy(Plugin):
    """Orders and filters the waiting queue of a scheduler that uses one.

    The scheduler calls :meth:`enqueue` on arrival, :meth:`shed` once per step
    (requests the policy drops, with reasons), then walks :meth:`candidates`
    in admission order, calling :meth:`admitted` for each request it admits
    (which removes it from the queue) until the step is full. :meth:`limit`
    caps how many requests may be active (adaptive concurrency); ``None``
    means no cap. :meth:`finished` reports completions back.
    Policies must be deterministic: ties broken by arrival then id.
    """

    #: the policy's answer may change from one step to the next with nothing else
    #: changing (an AIMD window): the scheduler then scans the queue every step and
    #: fast-forwards no span. False: it scans only after something changed.
    dynamic: ClassVar[bool] = False

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> AdmissionPolicy:
        return cls()

    def enqueue(self, request: Request, tick: int) -> str | None:
        """Queue a request; return a rejection reason to refuse it outright."""
        raise NotImplementedError

    def shed(self, tick: int) -> list[tuple[Request, str]]:
        """Requests to drop from the queue now, with the reason."""
        return []

    def candidates(self, tick: int) -> Iterator[Request]:
        raise NotImplementedError

    def admitted(self, request: Request, tick: int) -> tuple[str, ...] | None:
        """``request`` is admitted (remove it from the queue). May return flags
        (e.g. ``("deadline_at_risk",)``) that the scheduler attaches to the
        request's outcome: admitted, but the policy wants it noted."""
        raise NotImplementedError

    def finished(self, request: Request, tick: int) -> None:
        return None

    def limit(self, tick: int, *, kv_used: int, kv_capacity: int, active: int) -> int | None:
        return None

    def trace_detail(self) -> Mapping[str, Any] | None:
        """Policy state worth recording in this step's trace (e.g. AIMD window)."""
        return None

    def summary(self) -> Mapping[str, Any]:
        return {}

    def __len__(self) -> int:
        raise NotImplementedError


@attrs.define
class AdmissionContext:
    """What an admission policy may know about the engine it serves.

    ``clock`` lets a policy measure waits in ms (through the timing model);
    ``decode_slots`` (sequences decoded per step) lets it estimate completion.
    Either is None when the scheduler does not provide it.
    """

    kv_capacity_pages: int
    page_size: int
    timing: TimingModel | None
    allocator: KvAllocator | None = None
    clock: Clock | None = None
    decode_slots: int | None = None
