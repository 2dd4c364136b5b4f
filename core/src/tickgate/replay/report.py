"""Sinks that roll the tick stream up into a replay report.

Nothing here keeps the whole trace: the fingerprint is a running hash, the
summary running counters, per-request figures compact arrays, inter-token gaps
counts per microsecond value (:class:`~.token_gaps.TokenGaps`), the per-tick and
per-request detail are kept only up to a limit (the JSONL trace has all), and
the whole run's pressure over time down-sampled to fixed-size buckets
(:class:`~.series.Series`).

Fingerprint (documented in docs/report.md): runs of consecutive steps with
identical decisions are merged; each run is serialised as one line
``f"{tick} {span} {fields}\\n"`` where ``fields`` is
``json.dumps(record.canonical(), sort_keys=True, separators=(",", ":"))``;
the fingerprint is the first 16 hex characters of the SHA-256 of the lines.

Throughput (``latency.output_tokens_per_s``, ``latency.requests_per_s``) is what
a benchmark client computes over the same run: output tokens and requests
completed, divided by the benchmark's duration, from the first request's send
to the last completion (``latency.benchmark_duration_ms``). That is the
clients' definition: ``vllm bench serve`` (vllm/benchmarks/serve.py:
``benchmark_duration`` from the start of sending until every request has
returned, then ``calculate_metrics``: ``request_throughput = completed / dur_s``,
``output_throughput = sum(actual_output_lens) / dur_s``, failed requests
counting 0 tokens); ``sglang.bench_serving`` (python/sglang/bench_serving.py:
the same ``benchmark_duration`` and formulas, its first request sent at the
start); aiperf (``BenchmarkDurationMetric``: maximum response timestamp minus
minimum request timestamp; ``RequestThroughputMetric``: request count over that
duration). A send is a request's ``arrival_ms`` as its outcome gives it (a
closed-loop client's is when it was sent, not when it was due; a serial front
end's wait is the client's), a completion its ``finished_ms`` plus the timing
model's ``frontend_ms``, as the client's end-to-end latency counts it.
The engine's own rate over the time it was stepping is kept, named as such:
``busy_output_tokens_per_s`` over ``busy_ms`` (the idle gaps between arrivals
left out, so it is no figure a client prints).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..interfaces.model import RequestOutcome, TickRecord
from ..util.quantile import interpolate
from .serialize import outcome_to_json
from .series import Series
from .token_gaps import TokenGaps

DETAIL_LIMIT = 10_000
_INF = float("inf")


def _round(value: float, digits: int = 6) -> float:
    return round(float(value), digits)


def distribution(values: Iterable[float], digits: int = 6) -> dict[str, Any] | None:
    """count, mean, p50/p90/p95/p99 (:mod:`tickgate.util.quantile`, numpy's "linear") and max."""
    data = sorted(values)
    if not data:
        return None
    last = len(data) - 1
    # the index from the whole percent, (n - 1) * p / 100, as reports always had it
    # (not quantile(data, p / 100): the last bit differs, see tickgate.util.quantile)
    return {
        "count": len(data),
        "mean": _round(sum(data) / len(data), digits),
        "p50": _round(interpolate(data, last * 50 / 100.0), digits),
        "p90": _round(interpolate(data, last * 90 / 100.0), digits),
        "p95": _round(interpolate(data, last * 95 / 100.0), digits),
        "p99": _round(interpolate(data, last * 99 / 100.0), digits),
        "max": _round(data[-1], digits),
    }


class Arriving(Protocol):
    """What :meth:`SummarySink.arrival` reads of a request (a :class:`~tickgate.Request`, or
    the sidecar's copy of these four fields)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def arrival_ms(self) -> float | None: ...
    @property
    def tenant(self) -> str | None: ...
    @property
    def lane(self) -> str | None: ...


class _Segment:
    __slots__ = (
        "admitted_tokens",
        "completed",
        "deadline_missed",
        "e2e",
        "queue",
        "reasons",
        "rejected",
        "requests",
        "ttft",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.completed = 0
        self.rejected = 0
        self.queue = array("d")
        self.ttft = array("d")
        self.e2e = array("d")
        self.admitted_tokens = 0
        self.deadline_missed = 0
        self.reasons: dict[str, int] = {}


class SummarySink:
    """Counters, pressure, per-request distributions and segment statistics."""

    def __init__(self, detail_limit: int = DETAIL_LIMIT, *, every_sample: bool = True) -> None:
        """``every_sample``: the scheduler's ``decoded_lists_every_sample`` (how the
        inter-token gaps read the records)."""
        self.detail_limit = detail_limit
        self.request_count = 0
        self.total_prompt_tokens = 0
        self.total_decode_tokens = 0
        self.total_prefill_tokens = 0
        self.total_reserved = 0
        self.busy_ticks = 0
        self.peak_kv = 0
        self.kv_weighted = 0
        self.peak_queue = 0
        self.queue_weighted = 0
        self.peak_active = 0
        self.active_weighted = 0
        self.preemptions = 0
        self.elapsed_ms = 0.0
        self.ticks: list[dict[str, Any]] = []
        self.ticks_omitted = 0
        self.outcomes: list[dict[str, Any]] = []
        self.outcomes_omitted = 0
        self.completed = 0
        self.rejected = 0
        self.reasons: dict[str, int] = {}
        #: reason key -> [first reason text, {figure: [min, max]}] (rejections with figures)
        self.reason_figures: dict[str, list[Any]] = {}
        self.queue_ticks = array("d")
        self.ttft_ms = array("d")
        self.tpot_ms = array("d")
        self.e2e_ms = array("d")
        self.queue_ms = array("d")
        self.gaps = TokenGaps(every_sample)
        self.output_tokens_done = 0
        #: the client's window: its first send and its last completion (engine ms)
        self.first_send_ms = _INF
        self.last_done_ms = -_INF
        self.frontend_ms = 0.0  # the timing model's, given to report()
        self.segments: dict[tuple[str, str], _Segment] = {}
        self.series = Series()

    # -- sink protocol --------------------------------------------------------
    def arrival(self, request: Arriving) -> None:
        self.request_count += 1
        self.total_prompt_tokens += request.prompt_tokens
        self.series.arrival(request.arrival_ms)
        if request.tenant is not None:
            self._segment("tenant", request.tenant).requests += 1
        if request.lane is not None:
            self._segment("lane", request.lane).requests += 1

    def record(self, r: TickRecord) -> None:
        self.series.record(r)
        span = r.span
        self.busy_ticks += span
        self.total_decode_tokens += r.decode_tokens * span
        self.total_prefill_tokens += r.prefill_tokens * span
        self.total_reserved += r.kv_pages_reserved * span
        self.preemptions += len(r.preempted) * span
        if r.kv_pages_used > self.peak_kv:
            self.peak_kv = r.kv_pages_used
        self.kv_weighted += r.kv_pages_used * span
        if r.queued > self.peak_queue:
            self.peak_queue = r.queued
        self.queue_weighted += r.queued * span
        if r.active > self.peak_active:
            self.peak_active = r.active
        self.active_weighted += r.active * span
        if r.duration_ms is not None:
            self.elapsed_ms += r.duration_ms
            self.gaps.record(r, r.duration_ms)
        if len(self.ticks) < self.detail_limit:
            self.ticks.append(r.to_json())
        else:
            self.ticks_omitted += 1

    def outcome(self, o: RequestOutcome) -> None:
        segs = (
            [self._segment(k, v) for k, v in (("tenant", o.tenant), ("lane", o.lane)) if v is not None]
            if o.tenant is not None or o.lane is not None
            else ()
        )
        arrival = o.arrival_ms
        if arrival is not None and arrival < self.first_send_ms:
            self.first_send_ms = arrival
        if o.status == "completed":
            self.completed += 1
            self.output_tokens_done += o.output_tokens
            done = o.finished_ms
            if done is not None and done > self.last_done_ms:
                self.last_done_ms = done
            for s in segs:
                s.completed += 1
                s.admitted_tokens += o.prompt_tokens + o.output_tokens
        else:
            self.rejected += 1
            reason = o.reason_key or o.reason or "unspecified"
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
            if o.reason_figures:
                self._figures(reason, o)
            for s in segs:
                s.rejected += 1
                s.reasons[reason] = s.reasons.get(reason, 0) + 1
        q = o.queue_ticks
        if q is not None:
            self.queue_ticks.append(q)
            for s in segs:
                s.queue.append(q)
        if o.deadline_missed:
            for s in segs:
                s.deadline_missed += 1
        if o.arrival_ms is not None and o.admitted_ms is not None:
            self.queue_ms.append(o.admitted_ms - o.arrival_ms)
        self.gaps.outcome(o)
        if o.arrival_ms is not None and o.first_token_ms is not None:
            ttft = o.first_token_ms - o.arrival_ms
            self.ttft_ms.append(ttft)
            for s in segs:
                s.ttft.append(ttft)
            if o.finished_ms is not None:
                e2e = o.finished_ms - o.arrival_ms
                self.e2e_ms.append(e2e)
                for s in segs:
                    s.e2e.append(e2e)
                if o.output_tokens > 1:
                    self.tpot_ms.append((o.finished_ms - o.first_token_ms) / (o.output_tokens - 1))
        if len(self.outcomes) < self.detail_limit:
            self.outcomes.append(outcome_to_json(o))
        else:
            self.outcomes_omitted += 1

    def _figures(self, key: str, o: RequestOutcome) -> None:
        """Fold one rejection's figures into its reason's ranges: the report keeps a
        fixed size however many requests a reason rejects."""
        entry = self.reason_figures.get(key)
        if entry is None:
            entry = self.reason_figures[key] = [o.reason, {}]
        ranges = entry[1]
        for name, value in o.reason_figures:
            span = ranges.get(name)
            if span is None:
                ranges[name] = [value, value]
            elif value < span[0]:
                span[0] = value
            elif value > span[1]:
                span[1] = value

    def _rejection_figures(self) -> dict[str, Any]:
        return {
            key: {
                "example": example,
                **{name: {"min": lo, "max": hi} for name, (lo, hi) in sorted(ranges.items())},
            }
            for key, (example, ranges) in sorted(self.reason_figures.items())
        }

    def _segment(self, key: str, value: str) -> _Segment:
        seg = self.segments.get((key, value))
        if seg is None:
            seg = self.segments[(key, value)] = _Segment()
        return seg

    # -- report ---------------------------------------------------------------
    def report(
        self,
        *,
        total_ticks: int,
        kv_capacity: int,
        decode_slots: int,
        final_kv: int,
        fingerprint: str,
        extra: Mapping[str, Any],
        built: Mapping[str, Any],
        inputs: Mapping[str, Any],
        timed: bool,
        busy_ms: float | None = None,
        frontend_ms: float = 0.0,
    ) -> dict[str, Any]:
        """The report. ``frontend_ms``: the timing model's way in and out of the
        engine, added to every TTFT and end-to-end latency (as a client measures
        them; the outcomes keep the engine's times)."""
        self.frontend_ms = frontend_ms
        busy = self.busy_ticks
        slots = busy * decode_slots
        summary = {
            "request_count": self.request_count,
            "completed_requests": self.completed,
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_decode_tokens": self.total_decode_tokens,
            "total_reserved_kv_pages": self.total_reserved,
            "total_ticks": total_ticks,
            "peak_kv_pages": self.peak_kv,
            "peak_kv_pressure_pct": _round(100.0 * self.peak_kv / kv_capacity if kv_capacity else 0.0),
            "decode_capacity_utilization": _round(self.total_decode_tokens / slots if slots else 0.0),
            "final_kv_pages": final_kv,
            "trace_fingerprint": fingerprint,
        }
        mean = (lambda x: _round(x / busy)) if busy else (lambda x: 0.0)
        requests: dict[str, Any] = {
            "completed": self.completed,
            "rejected": self.rejected,
            "rejections_by_reason": dict(sorted(self.reasons.items())),
        }
        if self.reason_figures:  # only then: reports without such rejections keep their bytes
            requests["rejection_figures"] = self._rejection_figures()
        requests["preemptions"] = self.preemptions
        requests["queue_ticks"] = distribution(self.queue_ticks)
        report: dict[str, Any] = {
            "summary": summary,
            "pressure": {
                "queue": {"peak": self.peak_queue, "mean": mean(self.queue_weighted)},
                "active": {"peak": self.peak_active, "mean": mean(self.active_weighted)},
                "kv": {
                    "capacity_pages": kv_capacity,
                    "peak_pages": self.peak_kv,
                    "mean_pages": mean(self.kv_weighted),
                    "mean_pressure_pct": _round(100.0 * self.kv_weighted / (busy * kv_capacity))
                    if busy and kv_capacity
                    else 0.0,
                },
            },
            "utilization": {
                "busy_ticks": busy,
                "idle_ticks": total_ticks - busy,
                "decode_slots_per_tick": decode_slots,
                "decode_capacity": summary["decode_capacity_utilization"],
                "kv_mean": _round(self.kv_weighted / (busy * kv_capacity)) if busy and kv_capacity else 0.0,
                "prefill_tokens": self.total_prefill_tokens,
            },
            "requests": requests,
        }
        if timed or self.ttft_ms:
            if busy_ms is not None:
                self.elapsed_ms = busy_ms
            seconds = self.elapsed_ms / 1000.0
            window = self.benchmark_duration_ms()
            window_s = window / 1000.0 if window is not None else None
            report["latency"] = {
                "ttft_ms": distribution(self._client(self.ttft_ms), 3),
                "tpot_ms": distribution(self.tpot_ms, 3),
                "itl_ms": self.gaps.distribution(),
                "e2e_ms": distribution(self._client(self.e2e_ms), 3),
                "queue_ms": distribution(self.queue_ms, 3),
                "busy_ms": _round(self.elapsed_ms, 3),
                "benchmark_duration_ms": _round(window, 3) if window is not None else None,
                "output_tokens_per_s": _round(self.output_tokens_done / window_s, 3) if window_s else None,
                "requests_per_s": _round(self.completed / window_s, 3) if window_s else None,
                "busy_output_tokens_per_s": _round(self.output_tokens_done / seconds, 3) if seconds else None,
            }
        if self.segments:
            report["segments"] = self._segments_json()
        if extra:
            report["scheduler"] = dict(extra)
        report["inputs"] = dict(inputs)
        report["plugins"] = dict(built)
        report["series"] = self.series.to_json()
        report["outcomes"] = self.outcomes
        if self.outcomes_omitted:
            report["outcomes_omitted"] = self.outcomes_omitted
        report["ticks"] = self.ticks
        if self.ticks_omitted:
            report["ticks_omitted"] = self.ticks_omitted
        return report

    def benchmark_duration_ms(self) -> float | None:
        """The client's window (module docstring): from the first send to the last
        completion as the client sees it (``frontend_ms`` added); None before any
        request completed, or when the requests had no times."""
        if self.last_done_ms == -_INF or self.first_send_ms == _INF:
            return None
        window = self.last_done_ms + self.frontend_ms - self.first_send_ms
        return window if window > 0 else None

    def _client(self, values: Any) -> Any:
        """Latencies as a client sees them: the front end's ``frontend_ms`` added."""
        c = self.frontend_ms
        return values if not c else [v + c for v in values]

    def _segments_json(self) -> dict[str, Any]:
        out: dict[str, dict[str, Any]] = {}
        totals: dict[str, int] = {}
        for (key, _), seg in self.segments.items():
            totals[key] = totals.get(key, 0) + seg.admitted_tokens
        for (key, value), seg in sorted(self.segments.items()):
            total = totals[key]
            out.setdefault(key, {})[value] = {
                "requests": seg.requests,
                "completed": seg.completed,
                "rejected": seg.rejected,
                "rejections_by_reason": dict(sorted(seg.reasons.items())),
                "deadline_missed": seg.deadline_missed,
                "queue_ticks": distribution(seg.queue),
                "ttft_ms": distribution(self._client(seg.ttft), 3),
                "e2e_ms": distribution(self._client(seg.e2e), 3),
                "admitted_tokens": seg.admitted_tokens,
                "admitted_token_share": _round(seg.admitted_tokens / total) if total else 0.0,
            }
        return out
