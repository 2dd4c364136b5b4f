"""``goodput``: hold when fewer requests meet their service-level objectives.

DistServe (Zhong et al., OSDI 2024) measures goodput as the requests that meet
every SLO: a time-to-first-token bound and a time-per-output-token bound (the
mean gap after the first token). vllm bench serve's ``--goodput ttft:X tpot:Y
e2el:Z`` counts the same. Here the SLOs are options (``slo: {ttft_ms: 2000,
itl_ms: 50, e2e_ms: ...}``, at least one); ``itl_ms`` bounds the request's mean
inter-token gap (``tpot_ms``, else ``(latency - ttft) / (tokens_out - 1)``), as
both define it. A failed request meets no SLO.

The attainment (share of matched requests that are good) is compared paired:
each pair contributes ``good_c - good_b`` in {-1, 0, 1}; the delta is their mean
and its interval the normal (Wald) interval of a paired difference of
proportions, ``mean +/- z * sd / sqrt(n)`` (no resampling: exact and
deterministic at a million pairs). A drop past ``max_drop`` (absolute, default
0.05 = 5 points) whose interval lies below zero holds as a regression; a large
drop within noise is inconclusive.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ..comparison import Comparison
from .common import FRACTION, id_text, ids, no_join, not_recorded, pct, schema

#: SLO option -> the observation it bounds
SLO_KEYS = {"ttft_ms": "ttft_ms", "itl_ms": "tpot_ms", "e2e_ms": "latency_ms"}
NAN = math.nan


class Goodput(GateSignal):
    name = "goodput"
    description = "hold when the share of requests meeting every SLO (DistServe's goodput) drops"
    options_schema = schema(
        {
            "slo": {
                **schema({k: {"type": "number", "exclusiveMinimum": 0} for k in SLO_KEYS}),
                "minProperties": 1,
                "description": "ms bounds: ttft_ms (time to first token), itl_ms (mean inter-token gap), "
                "e2e_ms (end-to-end latency)",
            },
            "max_drop": {
                **FRACTION,
                "default": 0.05,
                "description": "absolute drop of the attainment, 0.05 = 5 points",
            },
            "confidence": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1, "default": 0.95},
            "min_pairs": {"type": "integer", "minimum": 1, "default": 100},
        },
        required=["slo"],
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        if not comparison.per_request:
            return no_join("goodput counts requests meeting their SLOs one by one")
        slo = {k: float(v) for k, v in sorted(self.options["slo"].items())}
        max_drop = float(self.options.get("max_drop", 0.05))
        min_pairs = int(self.options.get("min_pairs", 100))
        n = comparison.matched
        good_b, missing_b, per_b = self._good(comparison, "baseline", slo)
        good_c, missing_c, per_c = self._good(comparison, "candidate", slo)
        # a pair missing a figure on both sides counts against neither run (it is
        # not good on either side); only a figure one side lacks is missing evidence
        missing = sorted(set(missing_b) ^ set(missing_c))
        evidence = {
            "matched": n,
            "missing": len(missing),
            "min_pairs": min_pairs,
            "good_baseline": sum(good_b),
            "good_candidate": sum(good_c),
        }
        slo_text = ", ".join(f"{k} <= {v:g}" for k, v in slo.items())
        succeeded = [n - sum(comparison.aligned(w, "errors")) for w in ("baseline", "candidate")]
        if missing_b and [len(missing_b), len(missing_c)] == succeeded:  # no successful request has them
            return not_recorded(
                f"the figures the SLOs bound ({', '.join(SLO_KEYS[k] for k in slo)})",
                threshold=max_drop,
                evidence=evidence,
            )
        if missing:
            shown = ids(comparison.pair_id(p) for p in missing)
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=max_drop,
                evidence=evidence,
                message=f"{len(missing)} successful pairs lack a figure an SLO bounds ({slo_text})",
                next_action=f"record ttft/latency/tokens for request ids {id_text(shown, len(missing))}",
                details={"missing_ids": shown},
            )
        if n < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                threshold=max_drop,
                evidence=evidence,
                message=f"{n} matched requests; {min_pairs} are needed to judge goodput",
                next_action=f"gate again with at least {min_pairs - n} more matched requests",
            )
        rb, rc = sum(good_b) / n, sum(good_c) / n
        diffs = [c - b for b, c in zip(good_b, good_c)]
        mean = sum(diffs) / n
        var = sum(d * d for d in diffs) / n - mean * mean
        z = NormalDist().inv_cdf(0.5 + float(self.options.get("confidence", 0.95)) / 2)
        half = z * math.sqrt(max(var, 0.0) / n)
        ci = (mean - half, mean + half)
        per_slo = {k: {"baseline": per_b[k] / n, "candidate": per_c[k] / n} for k in slo}
        common: dict[str, Any] = {
            "baseline": rb,
            "candidate": rc,
            "delta": rc - rb,
            "threshold": max_drop,
            "unit": "fraction",
            "ci": ci,
            "confidence": float(self.options.get("confidence", 0.95)),
            "evidence": evidence,
            "details": {"slo": slo, "attainment_per_slo": per_slo},
        }
        head = (
            f"goodput ({slo_text}) {pct(rb)} -> {pct(rc)} of requests ({pct(rc - rb)}, "
            f"CI {pct(ci[0])}..{pct(ci[1])}), allowed drop {pct(max_drop)}"
        )
        if rb - rc > max_drop:
            worst = min(slo, key=lambda k: (per_slo[k]["candidate"] - per_slo[k]["baseline"], k))
            if ci[1] < 0:
                return SignalResult(
                    status="hold",
                    reason="regression",
                    message=f"{head}: regression",
                    next_action=f"the {worst} SLO lost most requests: profile the candidate's "
                    f"{SLO_KEYS[worst]} under this load",
                    **common,
                )
            return SignalResult(
                status="inconclusive",
                reason="inconclusive",
                message=f"{head}: large but not significant",
                next_action="gate again with more traffic to tell a regression from noise",
                **common,
            )
        return SignalResult(status="pass", reason="within_policy", message=head, **common)

    @staticmethod
    def _good(
        comparison: Comparison, which: str, slo: dict[str, float]
    ) -> tuple[list[int], list[int], dict[str, int]]:
        """Per pair 1 if the request met every SLO; the successful pairs
        missing a bounded figure; per SLO how many pairs met it."""
        errors = comparison.aligned(which, "errors")
        columns = {k: comparison.aligned(which, SLO_KEYS[k]) for k in slo}
        if "itl_ms" in slo:
            columns["itl_ms"] = _tpot(comparison, which)
        good: list[int] = []
        missing: list[int] = []
        met = dict.fromkeys(slo, 0)
        for p in range(comparison.matched):
            if errors[p]:
                good.append(0)
                continue
            ok = 1
            for key, bound in slo.items():
                v = columns[key][p]
                if v != v:  # NaN: not recorded
                    missing.append(p)
                    ok = 0
                    break
                if v <= bound:
                    met[key] += 1
                else:
                    ok = 0
            good.append(ok)
        return good, missing, met


def _tpot(comparison: Comparison, which: str) -> list[float]:
    """Each pair's mean inter-token gap: ``tpot_ms`` where known, else from
    latency, TTFT and the output length (vllm bench's TPOT); a one-token
    output has no gap and meets any bound (0)."""
    tpot = comparison.aligned(which, "tpot_ms")
    latency = comparison.aligned(which, "latency_ms")
    ttft = comparison.aligned(which, "ttft_ms")
    tokens = comparison.aligned(which, "tokens_out")
    out = []
    for t, lat, first, n in zip(tpot, latency, ttft, tokens):
        if t == t:
            out.append(t)
        elif n == n and n <= 1 and lat == lat:
            out.append(0.0)
        elif n == n and lat == lat and first == first:
            out.append((lat - first) / (n - 1))
        else:
            out.append(NAN)
    return out
