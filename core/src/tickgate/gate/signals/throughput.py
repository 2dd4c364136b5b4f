"""``throughput``: hold when the candidate serves the same traffic with
fewer output tokens per second or fewer requests per second.

Throughput is a property of a whole run, not of a request, so there is no
paired bootstrap: the rule is a relative drop past ``threshold`` (default 10 %,
as the latency signals), overall and in every segment with enough pairs.

Where the figures come from, per side:

* per request, when every compared pair has ``start_ms`` (send time) and
  ``latency_ms`` on both sides (vllm bench serve's start_times, aiperf,
  genai-perf, replay reports): over the pairs where neither side failed,
  ``duration = max(start + latency) - min(start)`` and output tokens/s =
  ``sum(tokens_out) / duration`` (as vllm bench and genai-perf define benchmark
  throughput), requests/s = pairs / duration. A segment's figures use its own
  pairs and span. Both sides are measured on the same requests, so a
  candidate that fails more requests is the error-rate signal's to judge, not
  a throughput drop;
* otherwise the run aggregates ``output_throughput`` / ``request_throughput``
  the client reported (no segments).

An open-loop benchmark (a fixed request rate) is paced by its arrivals: a
slower server there shows in latency, barely in throughput; a closed-loop or
offline run (``--max-concurrency``, a batch) shows it in throughput.
"""

from __future__ import annotations

from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ..comparison import Comparison, gather
from .common import DEFAULT_SEGMENT_KEYS, SEGMENT_KEYS, aggregate_count, not_recorded, pct, schema

METRICS = (
    ("output_tokens_per_s", "output tokens/s", "output_throughput"),
    ("requests_per_s", "requests/s", "request_throughput"),
)


class Throughput(GateSignal):
    name = "throughput"
    description = (
        "hold when output tokens/s or requests/s drop by more than the policy allows (overall or per segment)"
    )
    options_schema = schema(
        {
            "threshold": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": 0.10,
                "description": "relative drop, 0.10 = 10 % fewer tokens or requests per second",
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
                message="throughput is known on one side only",
                next_action="report the run's output_throughput and request_throughput on both sides",
            )
        drops: dict[str, float] = {}
        for k in known:
            b, c = base[k], cand[k]
            assert b is not None and c is not None  # known: both sides have it
            drops[k] = 1.0 - c / b if b else 0.0
        worst = max(known, key=lambda k: (drops[k], k))
        label = {k: lbl for k, lbl, _ in METRICS}
        head = "; ".join(f"{label[k]} {base[k]:.3f} -> {cand[k]:.3f} ({pct(-drops[k])})" for k in known)
        segments = self._segments(comparison, threshold, min_pairs) if per_request else []
        common: dict[str, Any] = {
            "baseline": base[worst],
            "candidate": cand[worst],
            "delta": -drops[worst],
            "threshold": threshold,
            "unit": "relative",
            "evidence": evidence,
            "details": {
                "source": source,
                "metrics": {k: {"baseline": base[k], "candidate": cand[k], "drop": drops[k]} for k in known},
                "segments": segments,
            },
        }
        if drops[worst] > threshold:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"{head}: {label[worst]} dropped past {pct(threshold)} (from {source})",
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
                + ", ".join(f"{s['key']}={s['value']} {pct(-s['drop'])}" for s in regressed)
                + " dropped",
                next_action="investigate the regressed segment's traffic first",
                **common,
            )
        if n < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message=f"{head}; only {n} requests",
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
                    metric = (
                        "output_tokens_per_s"
                        if b["output_tokens_per_s"] and c["output_tokens_per_s"]
                        else "requests_per_s"
                    )
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
