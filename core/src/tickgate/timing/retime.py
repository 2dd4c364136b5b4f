"""Re-time a recorded replay under other timing factors, without replaying it.

The fit tries hundreds of factor settings; replaying every point for each
would take the better part of an hour. Instead each point is replayed once
with a recording wrapper around its timing model: every step's pricing call
(``step_ms`` / ``price_step`` arguments, or a decode span's sequences,
context and length) is kept with the record it produced, and so is where the
engine jumped over idle time to an arrival. Re-timing walks those records
with another model: each step starts when the previous one ends (or at the
arrival the engine had jumped to, if that is later) and lasts what the other
model says. The scheduling decisions stay those of the recorded run, which is
exact when nothing arrives after t = 0 (offline batches: the clock never
decides) and an approximation otherwise; the fit re-records with its result
and searches again, a few times (:mod:`.fit`).

Re-timing a recording with the model it was recorded with must give back the
replay's own times; :func:`record` checks that and returns None when a
scheduler's calls cannot be matched to its records (the fit then replays).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, repeat
from typing import Any

import attrs

from ..interfaces import Clock, TimingModel
from ..interfaces.model import Request, RequestOutcome, TickRecord

__all__ = ["Recording", "RecordingTiming", "record"]


class RecordingTiming(TimingModel):
    """Delegates to ``inner`` and logs every pricing call with its result."""

    name = "recording"

    def __init__(self, inner: TimingModel) -> None:
        self.inner = inner
        self.calls: list[tuple[str, tuple[Any, ...], Any]] = []

    def __getattr__(self, name: str) -> Any:  # what schedulers or capacity read off the model
        return getattr(self.inner, name)

    @property
    def prices_shape(self) -> bool:
        return self.inner.prices_shape

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        ms = self.inner.step_ms(prefill_tokens, decode_seqs, context_tokens)
        self.calls.append(("step", (prefill_tokens, decode_seqs, context_tokens), ms))
        return ms

    def price_step(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        context_tokens: int,
        prefill_seqs: int,
        prefill_pairs: float,
        prefill_context: int,
    ) -> float:
        args = (prefill_tokens, decode_seqs, context_tokens, prefill_seqs, prefill_pairs, prefill_context)
        ms = self.inner.price_step(*args)
        self.calls.append(("price", args, ms))
        return ms

    def decode_span(
        self, start_ms: float, seqs: int, context: int, steps: int, until_ms: float | None = None
    ) -> tuple[int, float]:
        n, end = self.inner.decode_span(start_ms, seqs, context, steps, until_ms)
        self.calls.append(("span", (start_ms, seqs, context), (n, end)))
        return n, end

    def decode_durations(self, seqs: int, context: int, k: int) -> Any:
        return self.inner.decode_durations(seqs, context, k)

    def to_json(self) -> dict[str, Any]:
        return self.inner.to_json()


@attrs.frozen
class _Step:
    tick: int
    span: int
    start_ms: float
    #: the engine jumped over idle time to ``start_ms`` before this step
    after_idle: bool
    kind: str  # "step", "price", "span" or "free" (no time)
    args: tuple[Any, ...]
    decode_tokens: int


@attrs.frozen
class Recording:
    """The steps of one replay and its completed requests' (arrival, first
    token tick, finish tick, prompt, output) figures."""

    steps: tuple[_Step, ...]
    requests: tuple[tuple[float, int, int, int, int], ...]

    def retime(
        self, model: TimingModel
    ) -> tuple[list[tuple[float, float, float, int, int]], list[tuple[float, int]]]:
        """Every completed request's (arrival, first token, finish) in ms with its
        prompt and output tokens, and the (duration, decode tokens) of every
        step (a span's steps one by one), under ``model``."""
        ends: list[float] = []  # end of each step, by position
        span_ends: dict[int, list[float]] = {}  # a span's step ends, by position
        gaps: list[tuple[float, int]] = []
        now = 0.0
        for i, s in enumerate(self.steps):
            start = max(now, s.start_ms) if s.after_idle else now
            if s.kind == "span":
                _, seqs, context = s.args
                durations = list(model.decode_durations(seqs, context, s.span))
                per_step = s.decode_tokens // s.span if s.span else 0
                gaps.extend(zip(durations, repeat(per_step)))
                steps = list(accumulate(durations, initial=start))
                span_ends[i] = steps
                end = steps[-1]
            else:
                duration = (
                    model.price_step(*s.args)
                    if s.kind == "price"
                    else model.step_ms(*s.args)
                    if s.kind == "step"
                    else 0.0
                )
                end = start + duration
                if s.decode_tokens:
                    gaps.append((duration, s.decode_tokens))
            ends.append(end)
            now = end
        ticks = [s.tick for s in self.steps]

        def end_of(tick: int) -> float:
            i = bisect_right(ticks, tick) - 1
            if i in span_ends:
                return span_ends[i][tick - ticks[i] + 1]
            return ends[i]

        done = [
            (arrival, end_of(first), end_of(finish), prompt, output)
            for arrival, first, finish, prompt, output in self.requests
        ]
        return done, gaps


class _Sink:
    def __init__(self, clock: Clock, timing: RecordingTiming) -> None:
        self.clock = clock
        self.timing = timing
        self.rows: list[tuple[float, TickRecord, int]] = []
        self.outcomes: list[RequestOutcome] = []

    def arrival(self, request: Request) -> None:
        pass

    def record(self, record: TickRecord) -> None:
        self.rows.append((self.clock.now_ms, record, len(self.timing.calls)))

    def outcome(self, outcome: RequestOutcome) -> None:
        self.outcomes.append(outcome)


def _match(
    calls: list[tuple[str, tuple[Any, ...], Any]], record: TickRecord, start: float
) -> tuple[str, tuple[Any, ...]] | None:
    """The call that priced ``record`` (the last one whose result is its duration)."""
    duration = record.duration_ms or 0.0
    for kind, args, result in reversed(calls):
        if kind == "span":
            n, end = result
            if n == record.span and abs((end - start) - duration) <= 1e-9 * max(1.0, end):
                return kind, args
        elif record.span == 1 and result == duration:
            return kind, args
    if not calls and duration == 0.0 and not record.decode_tokens and not record.prefill_tokens:
        return "free", ()
    return None


def record(policy: Any, requests: list[Request]) -> Recording | None:
    """Replay ``requests`` under ``policy`` (a timed one) and record it; None
    when its steps cannot be re-timed faithfully (checked by re-timing it with
    its own model)."""
    from ..replay.engine import build_scheduler, run

    inner = policy.timing
    timing = RecordingTiming(inner)
    clock = Clock()
    scheduler, built = build_scheduler(attrs.evolve(policy, timing=timing), clock)
    sink = _Sink(clock, timing)
    run(
        requests,
        scheduler,
        clock,
        [sink],
        timed=True,
        max_ticks=policy.max_ticks,
        label=f'scheduler "{built["scheduler"]["name"]}"',
        timing=inner,
    )
    steps = []
    prev_end = 0.0
    done = 0
    for start, rec, upto in sink.rows:
        matched = _match(timing.calls[done:upto], rec, start)
        done = upto
        if matched is None:
            return None
        kind, args = matched
        steps.append(_Step(rec.tick, rec.span, start, start > prev_end, kind, args, rec.decode_tokens))
        prev_end = start + (rec.duration_ms or 0.0)
    requests_done: list[tuple[float, int, int, int, int]] = []
    recorded: list[tuple[float, float]] = []
    for o in sink.outcomes:
        if o.status == "completed" and o.first_token_tick is not None:
            # a timed replay: a completed request has all its times
            assert o.arrival_ms is not None and o.finished_tick is not None
            assert o.first_token_ms is not None and o.finished_ms is not None
            requests_done.append(
                (o.arrival_ms, o.first_token_tick, o.finished_tick, o.prompt_tokens, o.output_tokens)
            )
            recorded.append((o.first_token_ms, o.finished_ms))
    recording = Recording(tuple(steps), tuple(requests_done))
    again, _ = recording.retime(inner)
    for (_, first, finish, _, _), (first0, finish0) in zip(again, recorded):
        if abs(first - first0) > 1e-6 * max(1.0, first0) or abs(finish - finish0) > 1e-6 * max(1.0, finish0):
            return None
    return recording
