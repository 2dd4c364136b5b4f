"""``error-rate``: rollback when the candidate fails more requests.

The rate delta is ``(candidate errors - baseline errors) / matched pairs``
(paired: the same requests on both sides). An increase past the threshold is
a rollback however small the sample (one critical failure is enough evidence
to stop). A pass needs enough pairs to *show* the rate is within the limit:
``-ln(1 - confidence) / max_increase`` pairs (rule of three; 300 for 1% at
95%).
"""

from __future__ import annotations

from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ...util.words import plural
from ..comparison import Comparison
from ..stats import min_pairs_for_rate
from .common import FRACTION, id_text, ids, pct, schema


class ErrorRate(GateSignal):
    name = "error-rate"
    description = "rollback when the candidate's error rate rises by more than the policy allows"
    response = "rollback"
    options_schema = schema(
        {
            "max_increase": {
                **FRACTION,
                "default": 0.0,
                "description": "absolute rate increase, 0.01 = +1 point",
            },
            "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.95},
        }
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        threshold = float(self.options.get("max_increase", 0.0))
        min_pairs = min_pairs_for_rate(threshold, float(self.options.get("confidence", 0.95)))
        if not comparison.per_request:
            return self._aggregate(comparison, threshold, min_pairs)
        cand = comparison.candidate
        bflags = comparison.aligned("baseline", "errors")
        cflags = comparison.aligned("candidate", "errors")
        be, ce = sum(bflags), sum(cflags)
        new = [p for p, (b, c) in enumerate(zip(bflags, cflags)) if c and not b] if ce else []
        n = comparison.matched
        evidence = {
            "matched": n,
            "baseline_errors": be,
            "candidate_errors": ce,
            "new_errors": len(new),
            "min_pairs": min_pairs,
        }
        if n == 0:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                threshold=threshold,
                message="no matched requests to compare error rates",
                evidence=evidence,
                next_action="send the same traffic (same request ids) to both deployments",
            )
        rb, rc = be / n, ce / n
        common: dict[str, Any] = {
            "baseline": rb,
            "candidate": rc,
            "delta": rc - rb,
            "threshold": threshold,
            "unit": "fraction",
            "evidence": evidence,
        }
        if rc - rb > threshold:
            new_ids = [comparison.pair_id(p) for p in new]
            shown = ids(new_ids)
            messages = {rid: cand.error_messages.get(cand.index[rid], "") for rid in shown}
            return SignalResult(
                status="rollback",
                reason="error_increase",
                message=f"error rate {pct(rb)} -> {pct(rc)} (+{pct(rc - rb)} > {pct(threshold)}); "
                f"{plural(len(new), 'request')} {'fails' if len(new) == 1 else 'fail'} only on the candidate",
                next_action=f"inspect the candidate's errors for request ids {id_text(shown, len(new))}",
                details={"new_error_ids": shown, "candidate_errors": messages},
                **common,
            )
        if n < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message=f"{plural(n, 'matched request')}; {min_pairs} are needed to show an increase <= {pct(threshold)}",
                next_action=f"gate again with at least {min_pairs - n} more matched requests",
                **common,
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            message=f"error rate {pct(rb)} -> {pct(rc)} over {n} pairs",
            **common,
        )

    def _aggregate(self, comparison: Comparison, threshold: float, min_pairs: int) -> SignalResult:
        rates, counts = [], []
        for side in (comparison.baseline, comparison.candidate):
            agg = side.aggregates
            total = agg.get("request_count")
            rate = agg.get("error_rate")
            if rate is None and isinstance(agg.get("failed"), int) and total:
                rate = agg["failed"] / total
            if rate is None and isinstance(agg.get("failed"), int) and isinstance(agg.get("completed"), int):
                total = agg["failed"] + agg["completed"]
                rate = agg["failed"] / total if total else None
            rates.append(rate)
            counts.append(int(total or 0))
        evidence = {
            "matched": 0,
            "baseline_requests": counts[0],
            "candidate_requests": counts[1],
            "min_pairs": min_pairs,
        }
        if rates[0] is None or rates[1] is None:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message="no per-request join was possible and the run aggregates give no error rate "
                "(error_rate, or failed with request_count/completed)",
                next_action="capture per-request observations or report failed and request_count",
            )
        rb, rc = float(rates[0]), float(rates[1])
        common: dict[str, Any] = {
            "baseline": rb,
            "candidate": rc,
            "delta": rc - rb,
            "threshold": threshold,
            "unit": "fraction",
            "evidence": evidence,
        }
        head = f"run-level error rate {pct(rb)} -> {pct(rc)} (no per-request join was possible)"
        if rc - rb > threshold:
            return SignalResult(
                status="rollback",
                reason="error_increase",
                message=head,
                next_action="inspect the candidate's failed requests",
                **common,
            )
        if min(counts) < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message=f"{head}; {plural(min(counts), 'request')}",
                next_action=f"gate again with at least {min_pairs - min(counts)} more requests",
                **common,
            )
        return SignalResult(status="pass", reason="within_policy", message=head, **common)
