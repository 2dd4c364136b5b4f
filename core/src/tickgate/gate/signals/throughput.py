"""``throughput``: hold when the candidate serves the same requests at fewer
requests per second.

The signal is about **requests/s**: both sides are measured on the same
matched requests, so the number of requests is the same and requests/s falls
exactly when the candidate needs longer to serve them. Output tokens/s over the
same requests also moves when the candidate writes shorter or longer outputs,
which is the output-mismatch signal's to judge, not a throughput change; it is
shown after requests/s as context (``details.metrics``) and decides nothing.
Only a side that reports no requests/s at all (run aggregates without
``request_throughput``) is compared on output tokens/s instead, and the result
names that figure (``details.metric``) and leads with it.

Throughput is a property of a whole run, not of a request, so there is no
paired bootstrap: the rule is a relative drop past ``threshold`` (default 10 %,
as the latency signals), overall and in every segment with enough pairs.

Where the figures come from, per side:

* per request, when every compared pair has ``start_ms`` (send time) and
  ``latency_ms`` on both sides (vllm bench serve's start_times, aiperf,
  genai-perf, replay reports): over the pairs where neither side failed,
  ``duration = max(start + latency) - min(start)``, requests/s = pairs /
  duration and output tokens/s = ``sum(tokens_out) / duration`` (the window a
  benchmark client divides by: docs/report.md, "Latency"). A segment's figures
  use its own pairs and span. Both sides are measured on the same requests, so a
  candidate that fails more requests is the error-rate signal's to judge, not
  a throughput drop;
* otherwise the run aggregates ``request_throughput`` / ``output_throughput``
  the client reported (no segments).

An open-loop benchmark (a fixed request rate) is paced by its arrivals: a
slower server there shows in latency, barely in throughput; a closed-loop or
offline run (``--max-concurrency``, a batch) shows it in throughput.
"""

from __future__ import annotations

from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ...util.words import plural
from ..comparison import Comparison, gather
from .common import DEFAULT_SEGMENT_KEYS, SEGMENT_KEYS, aggregate_count, not_recorded, pct, schema

#: (figure, label, run aggregate), the compared figure first: the second only when a side
#: has no requests/s (module docstring)
METRICS = (
    ("requests_per_s", "requests/s", "request_throughput"),
    ("output_tokens_per_s", "output tokens/s", "output_throughput"),
)


class Throughput(GateSignal):
    name = "throughput"
    description = (
        "hold when requests/s over the same requests drop by more than the policy allows (overall or per "
        "segment); output tokens/s shown beside it"
    )
    options_schema = schema(
        {
            "threshold": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": 0.10,
                "description": "relative drop, 0.10 = 10 % fewer requests per second",
            },
            "min_pairs": {
                "type": "integer",
                "minimum": 1,
                "default": 50,
                "description": "requests a pass needs (per segment: to be judged at all)",
            },
            "segment_keys": {**SEGMENT_KEYS, "default": DEFAULT_SEGMENT_KEYS},
        }
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        threshold = float(self.options.get("threshold", 0.10))
        min_pairs = int(self.options.get("min_pairs", 50))
        per_request = comparison.per_request and self._timed(comparison, comparison.ok_pairs())
        if per_request:
            pairs = comparison.ok_pairs()
            base, cand = (
                self._rates(comparison, "baseline", pairs),
                self._rates(comparison, "candidate", pairs),
            )
            n = len(pairs)
            source = "per-request send times and latencies"
        else:
            base, cand = (
                self._aggregate(comparison.baseline.aggregates),
                self._aggregate(comparison.candidate.aggregates),
            )
            n = min(aggregate_count(s.aggregates) for s in (comparison.baseline, comparison.candidate))
            source = "the run aggregates"
        evidence = {"matched": comparison.matched, "used": n, "min_pairs": min_pairs}
        known = [k for k, _, _ in METRICS if base.get(k) is not None and cand.get(k) is not None]
        if not known:
            if all(v is None for v in (*base.values(), *cand.values())):
                return not_recorded(
                    "throughput (per-request start_ms with latency_ms, or run output_throughput / "
                    "request_throughput)",
                    threshold=threshold,
                    evidence=evidence,
                )
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message="no throughput figure (requests/s, or output tokens/s) is known on both sides",
                next_action="report the run's request_throughput (or output_throughput) on both sides",
            )
        drops: dict[str, float] = {}
        for k in known:
            b, c = base[k], cand[k]
            assert b is not None and c is not None  # known: both sides have it
            drops[k] = 1.0 - c / b if b else 0.0
        compared = known[0]  # requests/s when both sides have it (METRICS' order)
        label = {k: lbl for k, lbl, _ in METRICS}

        def figure(k: str) -> str:
            return f"{label[k]} {base[k]:.3f} -> {cand[k]:.3f} ({pct(-drops[k])})"

        head = figure(compared) + "".join(f" [{figure(k)}]" for k in known if k != compared)
        segments = self._segments(comparison, threshold, min_pairs) if per_request else []
        common: dict[str, Any] = {
            "baseline": base[compared],
            "candidate": cand[compared],
            "delta": -drops[compared],
            "threshold": threshold,
            "unit": "relative",
            "evidence": evidence,
            "details": {
                "source": source,
                "metric": compared,
                "metrics": {k: {"baseline": base[k], "candidate": cand[k], "drop": drops[k]} for k in known},
                "segments": segments,
            },
        }
        if drops[compared] > threshold:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"{head}: {label[compared]} dropped past {pct(threshold)} (from {source})",
                next_action="compare the candidate's batch sizes and step times with the baseline's "
                "under the same load",
                **common,
            )
        regressed = [s for s in segments if s["regressed"]]
        if regressed:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"{head}; but segment "
                + ", ".join(
                    f"{s['key']}={s['value']} {label[s['metric']]} {pct(-s['drop'])}" for s in regressed
                )
                + " dropped",
                next_action="investigate the regressed segment's traffic first",
                **common,
            )
        if n < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message=f"{head}; only {plural(n, 'request')}",
                next_action=f"gate again with at least {min_pairs - n} more requests",
                **common,
            )
        return SignalResult(
            status="pass", reason="within_policy", message=f"{head} (from {source})", **common
        )

    @staticmethod
    def _timed(comparison: Comparison, pairs: list[int]) -> bool:
        if not pairs:
            return False
        for which in ("baseline", "candidate"):
            for column in ("start_ms", "latency_ms"):
                values = comparison.aligned(which, column)
                if comparison.has_nan(values if len(values) == len(pairs) else gather(values, pairs)):
                    return False
        return True

    @staticmethod
    def _rates(comparison: Comparison, which: str, pairs: list[int]) -> dict[str, float | None]:
        starts = comparison.aligned(which, "start_ms")
        latencies = comparison.aligned(which, "latency_ms")
        tokens = comparison.aligned(which, "tokens_out")
        if len(pairs) != len(starts):
            starts, latencies, tokens = gather(starts, pairs), gather(latencies, pairs), gather(tokens, pairs)
        begin = min(starts)
        duration = max(s + lat for s, lat in zip(starts, latencies)) - begin
        if duration <= 0:
            return {"output_tokens_per_s": None, "requests_per_s": None}
        seconds = duration / 1000.0
        known_tokens = not comparison.has_nan(tokens)
        return {
            "output_tokens_per_s": sum(tokens) / seconds if known_tokens else None,
            "requests_per_s": len(pairs) / seconds,
        }

    @staticmethod
    def _aggregate(aggregates: dict[str, Any]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for key, _, agg in METRICS:
            v = aggregates.get(agg)
            out[key] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None
        return out

    def _segments(self, comparison: Comparison, threshold: float, min_pairs: int) -> list[dict[str, Any]]:
        ok = set(comparison.ok_pairs())
        out: list[dict[str, Any]] = []
        for key in self.options.get("segment_keys", DEFAULT_SEGMENT_KEYS):
            groups = comparison.groups(key)
            if len(groups) < 2:
                continue  # one segment is the total, judged above
            for value in sorted(groups):
                pairs = [p for p in groups[value] if p in ok]
                entry: dict[str, Any] = {"key": key, "value": value, "pairs": len(pairs), "regressed": False}
                if len(pairs) >= min_pairs:
                    b = self._rates(comparison, "baseline", pairs)
                    c = self._rates(comparison, "candidate", pairs)
                    metric = "requests_per_s"  # the signal's figure (module docstring)
                    b_rate, c_rate = b[metric], c[metric]
                    if b_rate and c_rate is not None:
                        drop = 1.0 - c_rate / b_rate
                        entry.update(
                            metric=metric,
                            baseline=b_rate,
                            candidate=c_rate,
                            drop=drop,
                            regressed=drop > threshold,
                        )
                out.append(entry)
        return out
