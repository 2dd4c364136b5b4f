"""The report's inter-token gaps: :class:`TokenGaps` follows every request's
sampled tokens through the step records and keeps their gaps as counts per
microsecond value; :func:`weighted_distribution` turns such counts into the
report's distribution (docs/report.md, "Inter-token latency")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..interfaces.model import RequestOutcome, TickRecord
from ..util.quantile import cumulative_weights, weighted_interpolate

__all__ = ["TokenGaps", "weighted_distribution"]


def _round(value: float, digits: int = 6) -> float:
    return round(float(value), digits)


def weighted_distribution(
    weights: Mapping[float, int], digits: int = 6, *, total: float | None = None, top: float | None = None
) -> dict[str, Any] | None:
    """:func:`distribution` of the multiset in which each value of ``weights``
    appears as often as its weight says, without expanding it: count, mean,
    p50/p90/p95/p99 (the same index from the whole percent, found by cumulative
    weight: :func:`tickgate.util.quantile.weighted_interpolate`) and max.

    ``total`` and ``top``: the sum and the maximum of the values before they were
    grouped (when the keys are rounded, the mean and max stay those of the
    unrounded values); by default those of the keys.
    """
    data = sorted((v, w) for v, w in weights.items() if w > 0)
    if not data:
        return None
    values = [v for v, _ in data]
    cumulative = cumulative_weights([w for _, w in data])
    count = cumulative[-1]
    last = count - 1
    if total is None:
        total = sum(v * w for v, w in data)
    return {
        "count": count,
        "mean": _round(total / count, digits),
        "p50": _round(weighted_interpolate(values, cumulative, last * 50 / 100.0), digits),
        "p90": _round(weighted_interpolate(values, cumulative, last * 90 / 100.0), digits),
        "p95": _round(weighted_interpolate(values, cumulative, last * 95 / 100.0), digits),
        "p99": _round(weighted_interpolate(values, cumulative, last * 99 / 100.0), digits),
        "max": _round(values[-1] if top is None else top, digits),
    }


class TokenGaps:
    """Inter-token gaps (``latency.itl_ms``) as weighted values, folded from the
    step records and outcomes as they pass (docs/report.md, "Inter-token latency").

    Steps run back to back while there is work, so a clock that adds up the
    records' ``duration_ms`` times every token: each request listed in a record's
    ``decoded`` samples one at the end of each of its ``span`` steps (a span's
    steps are given their mean). A request's gap is the time since it last
    sampled, kept per request in flight (one float, dropped when it completes);
    the first time a request is listed it samples its first token (TTFT, not a
    gap; in a span's first step, its outcome's first token later tells how much
    of the span came after it, so the total stays exact). A record that lists
    no ids gives its ``decode_tokens`` its step's duration.

    Schedulers whose prefill steps sample without listing the request
    (``Scheduler.decoded_lists_every_sample`` false: SGLang, TensorRT-LLM) list
    a request first for its second token: its gap is taken when it completes,
    from its outcome's ``first_token_ms`` (no idle time passes while a request
    runs, so the outcome's ``finished_ms`` maps the engine's clock onto this
    one). The token such a request samples when its recompute ends, after a
    preemption, is taken to end the record that admitted it again (a request
    preempted before it was ever listed: if its outcome's first token came
    before the preemption).

    Cost: a dictionary lookup per id a record lists (what the fingerprint
    encodes anyway), in C while every listed request sampled in the record
    before. Gaps are grouped by value rounded to the microsecond (the report's
    resolution): memory is bounded by the requests in flight and the range of
    the gaps, not by the number of steps or tokens; the sum and the maximum are
    kept unrounded.
    """

    __slots__ = (
        "bins",
        "clock",
        "early",
        "every_sample",
        "last",
        "paused",
        "resumed",
        "second",
        "span_first",
        "top",
        "total",
    )

    def __init__(self, every_sample: bool = True) -> None:
        self.bins: dict[float, int] = {}  # gap (ms, rounded to the microsecond) -> tokens
        self.total = 0.0
        self.top = 0.0
        self.clock = 0.0  # busy ms: when the current record starts
        self.last: dict[Any, float] = {}  # request in flight -> when it last sampled
        self.every_sample = every_sample
        # not every_sample: request -> when its first listed token came (its gap waits for the
        # outcome's first token), when it last sampled before it was preempted, when its
        # recompute sampled (admitted again); preempted before it was listed -> [when, readmitted]
        self.second: dict[Any, float] = {}
        self.paused: dict[Any, float] = {}
        self.resumed: dict[Any, float] = {}
        self.early: dict[Any, list[Any]] = {}
        #: every_sample: request whose first token came in a span's first step -> (that record's
        #: start, the span's mean step); its outcome corrects the total (see outcome)
        self.span_first: dict[Any, tuple[float, float]] = {}

    def _add(self, gap: float, tokens: int) -> None:
        key = round(gap, 3)
        bins = self.bins
        bins[key] = bins.get(key, 0) + tokens
        self.total += gap * tokens
        if gap > self.top:
            self.top = gap

    def record(self, r: TickRecord, duration: float) -> None:
        start = self.clock
        self.clock = end = start + duration
        ids = r.decoded
        span = r.span
        mean = duration / span if span > 1 else duration
        last = self.last
        if ids:
            before = list(map(last.get, ids))
            n = len(before)
            steady = before.count(start)  # sampled at the end of the record before
            if steady < n:
                firsts = before.count(None)
                if steady + firsts < n or (firsts and not self.every_sample):
                    steady = self._waited(ids, before, start, start + mean, steady)
                if firsts and span > 1 and self.every_sample:
                    for i, t in zip(ids, before):
                        if t is None:
                            self.span_first[i] = (start, mean)
            steady += (span - 1) * n  # every later step of a span
            if steady:
                key = round(mean, 3)
                bins = self.bins
                bins[key] = bins.get(key, 0) + steady
                self.total += mean * steady
                if mean > self.top:
                    self.top = mean
            for i in ids:  # faster than last.update(dict.fromkeys(ids, end)) for any batch size
                last[i] = end
        elif r.decode_tokens:
            self._add(mean, r.decode_tokens * span)
        if not self.every_sample and (r.preempted or r.admitted):
            self._recompute(r, start, end)
        if r.completed:
            for i in r.completed:
                last.pop(i, None)
            if not self.every_sample:
                for i in r.completed:
                    self.resumed.pop(i, None)
                    self.paused.pop(i, None)

    def _waited(
        self, ids: tuple[Any, ...], before: list[float | None], start: float, first_end: float, steady: int
    ) -> int:
        """The first step's gaps of requests that did not sample in the record before;
        returns ``steady`` with those given the step's own duration added."""
        waited = Counter(before)  # in C; requests that last sampled in the same step, together
        del waited[start]
        unlisted = waited.pop(None, 0)
        for t, k in waited.items():
            assert t is not None  # popped above
            self._add(first_end - t, k)
        if unlisted and not self.every_sample:  # else: first tokens
            for i, t in zip(ids, before):
                if t is not None:
                    continue
                t = self.resumed.pop(i, None) if self.resumed else None
                if t is None:  # the token before it is its first: its outcome's
                    self.second[i] = first_end
                elif t == start:
                    steady += 1
                else:
                    self._add(first_end - t, 1)
        return steady

    def _recompute(self, r: TickRecord, start: float, end: float) -> None:
        """Preempted and admitted requests, for a scheduler that does not list what a
        recompute samples: the gap before that token, and when it came."""
        if r.preempted:
            for i in r.preempted:
                t = self.last.pop(i, None)
                if t is not None:
                    self.paused[i] = t
                elif i not in self.early:
                    self.early[i] = [start, None]  # its first token, if any, came before start
        if r.admitted and (self.paused or self.early):
            for i in r.admitted:
                t = self.paused.pop(i, None)
                if t is not None:  # its recompute samples, unlisted
                    self._add(end - t, 1)
                    self.resumed[i] = end
                elif i in self.early:
                    self.early[i][1] = end

    def outcome(self, o: RequestOutcome) -> None:
        """The gap after a request's first token, for a scheduler that did not list it; for
        one that did, in a span's first step, the exact total of its gaps in that span."""
        if self.every_sample:
            got = self.span_first.pop(o.id, None) if self.span_first else None
            if got is not None and o.first_token_ms is not None and o.finished_ms is not None:
                # its later steps in the span were given the mean: their sum is the span's
                # (span x mean) less its first step, which the outcome's first token ends
                start, mean = got
                self.total += mean - (o.first_token_ms - (o.finished_ms - self.clock) - start)
            return
        t = self.second.pop(o.id, None) if self.second else None
        early = self.early.pop(o.id, None) if self.early else None
        if (t is None and early is None) or o.first_token_ms is None or o.finished_ms is None:
            return
        # o.finished_ms is the end of the record just folded, self.clock on the engine's clock
        first = o.first_token_ms - (o.finished_ms - self.clock)
        if early is not None:
            again = early[1] if early[1] is not None else self.clock
            if first < (early[0] + again) / 2:
                # its first token came before the preemption (by the start of that record),
                # its recompute sampled the next (by the end of the one that admitted it again)
                if t is not None:
                    self._add(again - first, 1)
                    self._add(t - again, 1)
                elif o.output_tokens == 2:  # the recompute's token was its last
                    self._add(self.clock - first, 1)
                return
        if t is not None:
            self._add(t - first, 1)

    def distribution(self) -> dict[str, Any] | None:
        """The gaps' distribution in ms (3 decimals)."""
        return weighted_distribution(self.bins, 3, total=self.total, top=self.top)
