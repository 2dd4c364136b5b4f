"""The ``seed`` scheduler: conservative paged reservation, budgeted admission
without strict head-of-line blocking, round-robin decode.

One step (tick):

1. Admission. Waiting requests are visited in the admission policy's order.
   A request is admitted when the KV pages for its whole declared context,
   ``ceil((prompt + max_output) / page_size)``, are free and its prompt fits in
   what is left of the step's prefill budget. A prompt larger than the whole
   budget is admitted only as the first admission of a step (it takes the
   step's budget). A request that does not fit is passed over and later ones
   may go ahead, but only for ``aging_ticks`` steps: after that it holds a
   *claim* on its pages and prompt tokens, and requests behind it are only
   admitted from what the claim leaves free. Its claim only ever shrinks the
   room of those behind it, so it is admitted as soon as its pages are free:
   nothing starves.
2. Decode. Active requests admitted in earlier steps decode one token each,
   round-robin, at most ``decode_batch_width`` per step.
3. Completion. A request that has produced ``max_output_tokens`` tokens
   completes; its pages come back at the end of the step.

Requests that can never fit (more pages than the whole cache) are rejected
on arrival with the reason.

Admission scans are event-driven: the queue is only walked when something
that could let a request in has changed (an arrival, freed pages, a step that
ran out of budget, or an admission policy whose state moves with time).

Fast-forward: when a step would admit nothing and every active request
decodes (no more of them than the batch width), the following steps make
the same decisions until the next completion or arrival. Such a run is
returned as one record with ``span`` > 1 (the fingerprint merges runs, so it
is unchanged). The timing model prices the span
(:meth:`~tickgate.timing.linear.TimingModel.decode_span`), adding step latencies in
the same order as single steps would, so every time in the report is the same
float; a span is only taken when the engine's ``now + duration`` lands on
exactly that time. Cost then grows with events, not with decoded tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from itertools import islice
from typing import Any

from ..interfaces import (
    AdmissionContext,
    AdmissionPolicy,
    BuildContext,
    Horizon,
    Scheduler,
    optional_attribute,
)
from ..interfaces.model import Request, RequestOutcome, TickRecord, completed_outcome, rejected_outcome

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["page_size", "kv_pages", "prefill_budget", "decode_batch_width"],
    "properties": {
        "page_size": {
            "type": "integer",
            "minimum": 1,
            "maximum": 65536,
            "description": "Tokens per KV page.",
        },
        "kv_pages": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000000,
            "description": "KV pages in the cache.",
        },
        "prefill_budget": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000000,
            "description": "Prompt tokens admitted per step.",
        },
        "decode_batch_width": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000,
            "description": "Sequences decoded per step, round-robin.",
        },
        "aging_ticks": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000000000,
            "description": "Steps a passed-over request waits before it claims its pages "
            "(0: claim at once; default 8).",
        },
    },
}


#: longest span taken at once (a longer run takes several records)
MAX_SPAN = 1 << 16


class _Active:
    __slots__ = ("admitted_tick", "decoded", "first_token_ms", "first_token_tick", "pages", "request")

    def __init__(self, request: Request, tick: int, pages: int) -> None:
        self.request = request
        self.decoded = 0
        self.admitted_tick = tick
        self.first_token_tick: int | None = None
        self.first_token_ms: float | None = None
        self.pages = pages


class SeedScheduler(Scheduler):
    name = "seed"
    description = "Conservative paged reservation, budgeted non-blocking admission, round-robin decode."
    options_schema = OPTIONS_SCHEMA
    #: fold runs of identical decode-only steps into one record (tests turn it off
    #: to check that it changes no decision)
    fast_forward = True

    def __init__(self, options: Mapping[str, Any], ctx: BuildContext) -> None:
        self.page_size = options["page_size"]
        self.kv_pages = options["kv_pages"]
        self.budget = options["prefill_budget"]
        self.width = options["decode_batch_width"]
        self.aging = options.get("aging_ticks", 8)
        self.clock = ctx.clock
        self.timing = ctx.timing
        self.kv = ctx.kv_allocator(self.kv_pages, self.page_size)
        self.admission = ctx.admission(
            AdmissionContext(
                self.kv_pages, self.page_size, ctx.timing, self.kv, clock=ctx.clock, decode_slots=self.width
            )
        )
        # Prefix cache: cached leading pages are shared, not newly reserved, and
        # their tokens skip prefill. Flags: "admitted but noted" from the policy.
        self.prefix_cache = bool(optional_attribute(self.kv, "has_prefix_cache"))
        self.prefix_hits: dict[str, int] = {}
        self.flagged: dict[str, tuple[str, ...]] = {}
        self.dynamic_admission = bool(optional_attribute(self.admission, "dynamic"))
        # Spans need an admission policy whose per-step hooks cannot act on their own.
        adm_cls = type(self.admission)
        self.can_span = (
            self.fast_forward
            and not self.dynamic_admission
            and adm_cls.shed is AdmissionPolicy.shed
            and adm_cls.trace_detail is AdmissionPolicy.trace_detail
        )
        self.active: deque[_Active] = deque()
        self.outcomes: list[RequestOutcome] = []
        self.rejected_now: list[str] = []
        # id -> (tick, ms) the request joined the queue; then with its admission's tick and start (ms)
        self.waiting_since: dict[str, tuple[int, float]] = {}
        self.admitted_at: dict[str, tuple[int, float, int, float]] = {}
        self.dirty = True

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> SeedScheduler:
        return cls(options, ctx)

    def pages_for(self, r: Request) -> int:
        return -(-(r.prompt_tokens + r.max_output_tokens) // self.page_size)

    # -- engine protocol -------------------------------------------------------
    def add(self, request: Request) -> None:
        pages = self.pages_for(request)
        if pages > self.kv_pages:
            self._reject(
                request,
                f"needs {pages} KV pages; the cache has {self.kv_pages}",
                key="needs more KV pages than the cache has",
                figures={"needed_pages": pages, "cache_pages": self.kv_pages},
            )
            return
        reason = self.admission.enqueue(request, self.clock.tick)
        if reason:
            self._reject(request, reason)
            return
        self.waiting_since[request.id] = (self.clock.tick, self.clock.now_ms)
        self.dirty = True

    def has_work(self) -> bool:
        return bool(self.active) or len(self.admission) > 0 or bool(self.rejected_now)

    def pop_outcomes(self) -> list[RequestOutcome]:
        out, self.outcomes = self.outcomes, []
        return out

    def kv_capacity_pages(self) -> int:
        return self.kv_pages

    def kv_used_pages(self) -> int:
        return self.kv.used

    def decode_slots_per_tick(self) -> int:
        return self.width

    def extra_summary(self) -> Mapping[str, Any]:
        """The allocator's and the admission policy's own totals, when they keep any."""
        out: dict[str, Any] = {}
        kv = self.kv.summary() if hasattr(self.kv, "summary") else {}
        if kv:
            out["kv_cache"] = dict(kv)
        adm = self.admission.summary()
        if adm:
            out["admission"] = dict(adm)
        return out

    # -- one step --------------------------------------------------------------
    def step(self, horizon: Horizon) -> TickRecord:
        if self.can_span:
            record = self._decode_span(horizon)
            if record is not None:
                return record
        tick = self.clock.tick
        for request, reason in self.admission.shed(tick):
            since = self.waiting_since.pop(request.id, None)
            self._reject(request, reason, since)
            self.dirty = True
        admitted, prefill, reserved = self._admit(tick)
        used_during = self.kv.used

        decoding: list[_Active] = []
        new = len(admitted)
        # Round-robin: the oldest entries of the ring (excluding this step's
        # admissions, which sit at its right end) decode, then rotate to the back.
        eligible = len(self.active) - new
        for _ in range(min(self.width, eligible)):
            entry = self.active.popleft()
            decoding.append(entry)
        context = 0
        for entry in decoding:
            context += entry.request.prompt_tokens + entry.decoded
            entry.decoded += 1
        duration = None
        if self.timing is not None:
            if new and self.timing.prices_shape:
                pairs = earlier = 0  # each admitted prompt is one chunk after its prefix hit
                for entry in islice(reversed(self.active), new):
                    before = self.prefix_hits.get(entry.request.id, 0)
                    n = entry.request.prompt_tokens - before
                    pairs += n * before + n * (n + 1) // 2
                    earlier += before
                duration = self.timing.price_step(prefill, len(decoding), context, new, pairs, earlier)
            else:
                duration = self.timing.step_ms(prefill, len(decoding), context)
        end_ms = self.clock.now_ms + duration if duration is not None else None

        completed: list[str] = []
        survivors: list[_Active] = []
        for entry in decoding:
            if entry.first_token_tick is None:
                entry.first_token_tick = tick
                entry.first_token_ms = end_ms
            if entry.decoded >= entry.request.max_output_tokens:
                completed.append(entry.request.id)
                self.kv.free(entry.request.id)
                self.admission.finished(entry.request, tick)
                self.outcomes.append(self._outcome(entry, tick, end_ms))
                self.dirty = True
            else:
                survivors.append(entry)
        # A turn queue: this step's admissions joined it before the survivors
        # of this step's decode rejoin at its back.
        self.active.extend(survivors)

        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        detail = self.admission.trace_detail()
        return TickRecord(
            tick=tick,
            admitted=tuple(admitted),
            prefill_tokens=prefill,
            decoded=tuple(e.request.id for e in decoding),
            decode_tokens=len(decoding),
            queued=len(self.admission),
            active=len(self.active) + len(completed),
            kv_pages_used=used_during,
            kv_pages_reserved=reserved,
            completed=tuple(completed),
            rejected=rejected,
            duration_ms=duration,
            detail={"admission": detail} if detail else None,
        )

    def _decode_span(self, horizon: Horizon) -> TickRecord | None:
        """Steps that only decode every active request, up to (not including) the
        next completion and never starting at or after the next arrival; None
        when fewer than two such steps follow (take a normal step)."""
        active = self.active
        n = len(active)
        if n == 0 or n > self.width or self.rejected_now:
            return None
        if len(self.admission) and (self.dirty or self.dynamic_admission):
            return None  # an admission scan is due
        steps = min(min(e.request.max_output_tokens - e.decoded for e in active) - 1, MAX_SPAN)
        if horizon.max_ticks is not None and horizon.max_ticks < steps:
            steps = horizon.max_ticks
        if steps < 2:
            return None
        clock = self.clock
        tick = clock.tick
        timing = self.timing
        duration: float | None = None
        first_end: float | None = None
        if timing is not None:
            start = clock.now_ms
            context = sum(e.request.prompt_tokens + e.decoded for e in active)
            steps, t = timing.decode_span(start, n, context, steps, horizon.until_ms)
            if steps < 2:
                return None
            first_end = start + timing.step_ms(0, n, context)
            duration = t - start
            if start + duration != t:
                return None  # the engine's clock would not land on t exactly
        for e in active:
            if e.first_token_tick is None:
                e.first_token_tick = tick
                e.first_token_ms = first_end
            e.decoded += steps
        return TickRecord(
            tick=tick,
            decoded=tuple(e.request.id for e in active),
            decode_tokens=n,
            queued=len(self.admission),
            active=n,
            kv_pages_used=self.kv.used,
            span=steps,
            duration_ms=duration,
        )

    def _admit(self, tick: int) -> tuple[list[str], int, int]:
        if not (self.dirty or self.dynamic_admission) or len(self.admission) == 0:
            return [], 0, 0
        self.dirty = False
        limit = self.admission.limit(
            tick, kv_used=self.kv.used, kv_capacity=self.kv_pages, active=len(self.active)
        )
        admitted: list[str] = []
        prefill = reserved = 0
        free = self.kv.free_pages
        budget = self.budget
        claimed_pages = claimed_tokens = 0
        claimed = False
        active = len(self.active)
        for request in self.admission.candidates(tick):
            if limit is not None and active >= limit:
                self.dirty = True  # the window, not the candidates, stopped us
                break
            if free - claimed_pages <= 0:
                break
            if type(request) is not Request:
                raise _bad_candidate(self.admission, request)
            pages = self.pages_for(request)
            tokens = request.prompt_tokens
            blocks = request.prefix_blocks if self.prefix_cache else None
            if blocks:
                hit, pages = self.kv.plan_prefix(blocks, tokens, pages)
                tokens -= hit
            fits_pages = pages <= free - claimed_pages
            fits_budget = tokens <= budget - claimed_tokens or (
                tokens > self.budget and not admitted and not claimed
            )
            if fits_pages and fits_budget:
                flags = self.admission.admitted(request, tick)
                if flags:
                    self.flagged[request.id] = tuple(flags)
                if blocks:
                    hit = self.kv.reserve_prefix(
                        request.id, self.pages_for(request), blocks, request.prompt_tokens
                    )
                    if hit:
                        self.prefix_hits[request.id] = hit
                else:
                    self.kv.reserve(request.id, pages)
                since_tick, since_ms = self.waiting_since.pop(request.id)
                self.admitted_at[request.id] = (since_tick, since_ms, tick, self.clock.now_ms)
                self.active.append(_Active(request, tick, pages))
                admitted.append(request.id)
                free -= pages
                budget -= min(tokens, budget)
                prefill += tokens
                reserved += pages
                active += 1
                continue
            if fits_pages:
                self.dirty = True  # out of budget this step; it may fit in the next
            if not claimed and tick - self.waiting_since[request.id][0] >= self.aging:
                claimed = True
                claimed_pages = pages
                claimed_tokens = min(tokens, self.budget)
        return admitted, prefill, reserved

    def _reject(
        self,
        request: Request,
        reason: str,
        since: tuple[int, float] | None = None,
        *,
        key: str | None = None,
        figures: Mapping[str, int] | None = None,
    ) -> None:
        self.rejected_now.append(request.id)
        self.outcomes.append(
            rejected_outcome(
                request,
                reason,
                tick=self.clock.tick,
                arrival_tick=since[0] if since else None,
                key=key,
                figures=figures,
            )
        )

    def _outcome(self, entry: _Active, tick: int, end_ms: float | None) -> RequestOutcome:
        r = entry.request
        since_tick, since_ms, admitted_tick, admitted_ms = self.admitted_at.pop(r.id)
        timed = self.timing is not None
        return completed_outcome(
            r,
            arrival_tick=since_tick,
            admitted_tick=admitted_tick,
            first_token_tick=entry.first_token_tick,
            finished_tick=tick,
            output_tokens=entry.decoded,
            arrival_ms=since_ms if timed else None,
            admitted_ms=admitted_ms if timed else None,
            first_token_ms=entry.first_token_ms,
            finished_ms=end_ms,
            prefix_hit_tokens=self.prefix_hits.pop(r.id, 0),
            flags=self.flagged.pop(r.id, ()),
        )


def _bad_candidate(policy: Any, value: Any) -> Exception:
    """An admission policy offered something that is not a request: name the policy."""
    from ..host.registry import get_registry
    from ..util.errors import PluginError

    name = getattr(policy, "name", type(policy).__name__)
    try:
        who = get_registry().get("admission", name).label()
    except Exception:
        who = f'admission "{name}"'
    return PluginError(
        f"{who} offered {type(value).__name__} as a candidate, not a tickgate.interfaces.model.Request"
    )
