"""The report's ``series``: KV pages, queue depth and running batch over the
whole replay, down-sampled to at most :data:`MAX_POINTS` buckets.

Why: the report keeps only the first ``detail_limit`` tick records, so a
picture of a long replay (``tickgate report --html``) would show its first
minutes only; and keeping every step of a 1M-request replay would make the
report as large as the trace. So the steps are rolled up into fixed-width
buckets of ``width`` steps, aligned on multiples of ``width`` from step 0.
When a step lands past the last bucket, ``width`` doubles and neighbouring
buckets merge pairwise (``[0, w)`` and ``[w, 2w)`` become ``[0, 2w)``): the
memory is fixed, the pass is single, and the result is the same whatever the
order of the doublings, so it depends only on the steps themselves -- a
scheduler that fast-forwards a span (one record of ``span`` steps, split
across the buckets it covers) gives the same counts, sums and maxima as one
that steps through it. Everything is integer arithmetic but the ms clock,
which is accumulated exactly as the engine's :class:`~tickgate.interfaces.Clock`
is (durations added in order, idle jumps to the next arrival), so it is the
same bytes in every process.

Each bucket keeps its first busy step, the clock when that step began (timed
replays), the number of busy steps, and the max and the sum (-> mean over the
busy steps) of ``kv_pages_used``, ``queued`` and ``active``. Idle steps (the
engine jumped the clock: no record) are in no bucket. docs/report.md,
"Series", documents the block.
"""

from __future__ import annotations

from typing import Any

from ..interfaces.model import TickRecord

#: buckets kept at most (an even number: buckets merge pairwise)
MAX_POINTS = 512


class Series:
    """A sink-side accumulator: :meth:`arrival` and :meth:`record` in engine order,
    then :meth:`to_json`."""

    __slots__ = (
        "a_max",
        "a_sum",
        "cur",
        "end",
        "first",
        "hi",
        "kv_max",
        "kv_sum",
        "ms",
        "now_ms",
        "points",
        "q_max",
        "q_sum",
        "steps",
        "timed",
        "width",
    )

    def __init__(self, points: int = MAX_POINTS) -> None:
        if points < 2 or points % 2:
            raise ValueError(f"points must be an even number >= 2, not {points}")
        self.points = points
        self.width = 1
        # one past the current bucket's last step: a record ending by then lies in it (records
        # come in step order) and takes the fast path; 0 at first, so the first record enters
        # its bucket through _spread
        self.hi = 0
        self.cur = 0
        self.steps = [0] * points
        self.first = [0] * points
        self.ms: list[float | None] = [None] * points
        self.kv_sum = [0] * points
        self.kv_max = [0] * points
        self.q_sum = [0] * points
        self.q_max = [0] * points
        self.a_sum = [0] * points
        self.a_max = [0] * points
        self.now_ms = 0.0  # the engine's clock at the next record's start (timed replays)
        self.timed = False
        self.end = 0  # one past the last busy step

    def arrival(self, arrival_ms: float | None) -> None:
        """The engine jumps an idle clock to the next arrival's time and delivers it
        (engine.run): so a record starts at the later of the previous one's end and
        the latest arrival delivered before it."""
        if arrival_ms is not None and arrival_ms > self.now_ms:
            self.now_ms = arrival_ms

    def record(self, r: TickRecord) -> None:
        tick = r.tick
        span = r.span
        end = tick + span
        if end <= self.hi:
            i = self.cur
            self.steps[i] += span
            v = r.kv_pages_used
            self.kv_sum[i] += v * span
            if v > self.kv_max[i]:
                self.kv_max[i] = v
            v = r.queued
            self.q_sum[i] += v * span
            if v > self.q_max[i]:
                self.q_max[i] = v
            v = r.active
            self.a_sum[i] += v * span
            if v > self.a_max[i]:
                self.a_max[i] = v
        else:
            self._spread(r, tick, span, end)
        self.end = end
        d = r.duration_ms
        if d is not None:
            self.now_ms += d
            self.timed = True

    def _spread(self, r: TickRecord, tick: int, span: int, end: int) -> None:
        """The slow path: a record that enters a new bucket (or several: a long span)."""
        while end > self.width * self.points:
            self._merge()
        w = self.width
        kv, q, a = r.kv_pages_used, r.queued, r.active
        d = r.duration_ms
        for b in range(tick // w, (end - 1) // w + 1):
            start = max(tick, b * w)
            n = min(end, (b + 1) * w) - start
            if not self.steps[b]:
                self.first[b] = start
                if d is not None:
                    # inside a span the steps are taken as equally long (the record has one duration)
                    self.ms[b] = self.now_ms + d * (start - tick) / span if start > tick else self.now_ms
            self.steps[b] += n
            self.kv_sum[b] += kv * n
            self.q_sum[b] += q * n
            self.a_sum[b] += a * n
            if kv > self.kv_max[b]:
                self.kv_max[b] = kv
            if q > self.q_max[b]:
                self.q_max[b] = q
            if a > self.a_max[b]:
                self.a_max[b] = a
        self.cur = (end - 1) // w
        self.hi = (self.cur + 1) * w

    def _merge(self) -> None:
        """Double the width: buckets ``2j`` and ``2j + 1`` become bucket ``j``."""
        half = self.points // 2
        pad = [0] * half
        steps, first, ms = self.steps, self.first, self.ms
        # a merged bucket starts where its left half does, if that had a step (steps are in order)
        lead = [2 * j if steps[2 * j] else 2 * j + 1 for j in range(half)]
        self.first = [first[b] for b in lead] + pad
        self.ms = [ms[b] for b in lead] + [None] * half
        for name in ("steps", "kv_sum", "q_sum", "a_sum"):
            old = getattr(self, name)
            setattr(self, name, [old[2 * j] + old[2 * j + 1] for j in range(half)] + pad)
        for name in ("kv_max", "q_max", "a_max"):
            old = getattr(self, name)
            setattr(self, name, [max(old[2 * j], old[2 * j + 1]) for j in range(half)] + pad)
        self.width *= 2
        self.hi = 0  # the next record finds its bucket through _spread

    def to_json(self) -> dict[str, Any]:
        """Columns over the buckets that had busy steps, in step order."""
        used = (self.end - 1) // self.width + 1 if self.end else 0
        keep = [b for b in range(used) if self.steps[b]]
        out: dict[str, Any] = {
            "max_points": self.points,
            "bucket_steps": self.width,
            "points": len(keep),
            "tick": [self.first[b] for b in keep],
        }
        if self.timed:
            ms = self.ms
            out["ms"] = [None if (t := ms[b]) is None else round(t, 3) for b in keep]
        out["steps"] = [self.steps[b] for b in keep]
        for name, sums, maxima in (
            ("kv_pages_used", self.kv_sum, self.kv_max),
            ("queued", self.q_sum, self.q_max),
            ("active", self.a_sum, self.a_max),
        ):
            out[name] = {
                "max": [maxima[b] for b in keep],
                "mean": [round(sums[b] / self.steps[b], 3) for b in keep],
            }
        return out
