"""Tail regressions judged by a paired bootstrap: p95 latency, TTFT,
decode-token (inter-token) p95 and memory pressure. All respond with hold.

Decision rule (Kayenta: a regression must be large AND significant; Argo:
inconclusive is its own outcome), with ``d`` the point delta over all pairs
and ``[lo, hi]`` its bootstrap interval:

* ``d > threshold`` and ``lo > 0``  -> hold, ``regression``
* ``d > threshold`` and ``lo <= 0`` -> ``inconclusive`` (large but within
  noise: gather more traffic; the policy's ``gate.inconclusive`` says what it
  makes of the release, by default its own decision and exit code 11)
* otherwise pass, unless one segment (backend, model, ...) with enough pairs
  of its own shows a large and significant regression -> hold, naming it.

Fewer usable pairs than ``ceil(min_tail_samples / (1 - quantile))`` (200 for
the p95 with 10 tail samples), or more pairs missing the value than
``max_missing_fraction``, holds: too little data is never a pass.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from ...interfaces.gate import GateSignal, SignalResult
from ...util.words import plural
from ..comparison import Comparison, gather
from ..stats import Delta, min_pairs_for_quantile, paired_quantile_delta, point_delta, select_quantile
from .common import (
    DEFAULT_SEGMENT_KEYS,
    FRACTION,
    SEGMENT_KEYS,
    aggregate_count,
    id_text,
    ids,
    not_recorded,
    pct,
    schema,
)

BASE_OPTIONS = {
    "quantile": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.95},
    "confidence": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1, "default": 0.95},
    "resamples": {"type": "integer", "minimum": 0, "maximum": 100000, "default": 200},
    "max_bootstrap_pairs": {"type": "integer", "minimum": 100, "maximum": 10000000, "default": 4000},
    "min_tail_samples": {"type": "integer", "minimum": 1, "maximum": 1000000, "default": 10},
    "min_pairs": {"type": "integer", "minimum": 1, "description": "overrides the derived minimum"},
    "max_missing_fraction": {**FRACTION, "default": 0.0},
    "segment_keys": {**SEGMENT_KEYS, "default": DEFAULT_SEGMENT_KEYS},
}


def _qname(q: float) -> str:
    return f"p{q * 100:g}".replace(".", "")


class QuantileRegression(GateSignal):
    """Shared machinery; subclasses name the column and the delta's kind."""

    response = "hold"
    column: ClassVar[str] = ""
    label: ClassVar[str] = ""
    relative: ClassVar[bool] = True
    #: run-level aggregate to compare when there are no per-request pairs
    aggregate: ClassVar[str] = ""
    default_threshold: ClassVar[float] = 0.10
    options_schema = schema(
        {
            **BASE_OPTIONS,
            "threshold": {
                "type": "number",
                "minimum": 0,
                "default": 0.10,
                "description": "relative increase of the quantile, 0.10 = +10%",
            },
        }
    )

    def opt(self, key: str) -> Any:
        value = self.options.get(key)
        if value is None and key != "min_pairs":
            value = BASE_OPTIONS[key].get("default") if key in BASE_OPTIONS else self.default_threshold
        return value

    def _min_pairs(self) -> int:
        derived = min_pairs_for_quantile(self.opt("quantile"), self.opt("min_tail_samples"))
        return int(self.opt("min_pairs") or derived)

    def _fmt(self, value: float) -> str:
        return pct(value) if self.relative else f"{value:+.4f}"

    def evaluate(self, comparison: Comparison) -> SignalResult:
        q = float(self.opt("quantile"))
        threshold = float(self.opt("threshold"))
        min_pairs = self._min_pairs()
        if not comparison.per_request:
            return self._aggregate(comparison, q, threshold, min_pairs)
        ok = comparison.ok_pairs()
        used, bv, cv, missing = comparison.paired(self.column, ok)
        evidence = {
            "matched": comparison.matched,
            "eligible": len(ok),
            "used": len(used),
            "missing": len(missing),
            "recorded_by_neither": len(ok) - len(used) - len(missing),
            "min_pairs": min_pairs,
        }
        what = f"{_qname(q)} {self.label}"
        if ok and not used and not missing:  # no eligible pair has it on either side
            return not_recorded(self.column, threshold=threshold, evidence=evidence)
        if missing and len(missing) > float(self.opt("max_missing_fraction")) * len(ok):
            shown = ids(comparison.pair_id(p) for p in missing)
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message=f"{len(missing)} of {len(ok)} eligible pairs have no {self.column} on one side",
                next_action=f"record {self.column} for request ids {id_text(shown, len(missing))}",
                details={"missing_ids": shown},
            )
        if len(used) < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                threshold=threshold,
                evidence=evidence,
                message=f"{len(used)} usable pairs for the {what}; at least {min_pairs} are needed",
                next_action=f"gate again with at least {min_pairs - len(used)} more matched, successful requests",
            )
        seed = comparison.seed_for(self.name)
        d = self._delta(comparison, bv, cv, q, seed)
        if d is None:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message=f"baseline {what} is 0; a relative regression cannot be measured",
                next_action=f"check that {self.column} is recorded in real units on the baseline",
            )
        segments = self._segments(comparison, used, bv, cv, q, threshold, min_pairs, seed)
        common: dict[str, Any] = {
            "baseline": d.baseline,
            "candidate": d.candidate,
            "delta": d.delta,
            "threshold": threshold,
            "unit": "relative" if self.relative else "absolute",
            "ci": (d.ci_low, d.ci_high) if d.ci_low is not None else None,
            "confidence": float(self.opt("confidence")) if d.ci_low is not None else None,
            "evidence": {**evidence, "resamples": d.resamples, "bootstrap_pairs": d.bootstrap_pairs},
            "details": {"segments": segments},
        }
        large = d.delta > threshold
        significant = d.ci_low is not None and d.ci_low > 0
        interval = ""
        if d.ci_low is not None:
            assert d.ci_high is not None  # an interval has both bounds
            interval = f" (CI {self._fmt(d.ci_low)}..{self._fmt(d.ci_high)})"
        head = (
            f"{what} {d.baseline:.3f} -> {d.candidate:.3f}: {self._fmt(d.delta)}{interval}, "
            f"threshold {self._fmt(threshold)}"
        )
        if large and significant:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"{head}: regression",
                next_action=self._next_action(segments, overall=True),
                **common,
            )
        if large:
            more = max(len(used), min_pairs)
            return SignalResult(
                status="inconclusive",
                reason="inconclusive",
                message=f"{head}: large but not significant",
                next_action=f"gate again with more traffic (about {more} more matched requests) "
                "to tell a regression from noise",
                **common,
            )
        regressed = [s for s in segments if s["regressed"]]
        if regressed:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"{head}; but segment{'s' if len(regressed) > 1 else ''} "
                + ", ".join(f"{s['key']}={s['value']} {self._fmt(s['delta'])}" for s in regressed)
                + " regressed",
                next_action=self._next_action(segments, overall=False),
                **common,
            )
        return SignalResult(status="pass", reason="within_policy", message=head, **common)

    def _delta(
        self, comparison: Comparison, bv: list[float], cv: list[float], q: float, seed: int
    ) -> Delta | None:
        d = paired_quantile_delta(
            bv,
            cv,
            q=q,
            relative=self.relative,
            confidence=float(self.opt("confidence")),
            resamples=int(self.opt("resamples")),
            max_pairs=int(self.opt("max_bootstrap_pairs")),
            seed=seed,
            point=(comparison.quantile(bv, q), comparison.quantile(cv, q)),
        )
        if self.relative and d.baseline <= 0:
            return None
        return d

    def _segments(
        self,
        comparison: Comparison,
        used: list[int],
        bv: list[float],
        cv: list[float],
        q: float,
        threshold: float,
        min_pairs: int,
        seed: int,
    ) -> list[dict[str, Any]]:
        """Point delta per segment value; a bootstrap only where it looks large."""
        out: list[dict[str, Any]] = []
        everything = len(used) == comparison.matched  # then positions in `used` are pair indices
        for key in self.opt("segment_keys"):
            groups: dict[str, list[int]] = {}
            if everything:  # only the sizes: quantiles come from the comparison's segment columns
                sizes = comparison.group_sizes(key)
            else:
                values = comparison.segment_values(key)
                for i, p in enumerate(used):
                    v = values[p]
                    if v is not None:
                        groups.setdefault(v, []).append(i)
                sizes = {value: len(rows) for value, rows in groups.items()}
            if len(sizes) < 2:
                continue  # one segment is the total, judged above
            for value in sorted(sizes):
                entry: dict[str, Any] = {
                    "key": key,
                    "value": value,
                    "pairs": sizes[value],
                    "regressed": False,
                }
                if sizes[value] >= min_pairs:
                    if everything:  # the segment's values are the cached segment columns
                        point = point_delta(
                            comparison.group_quantile("baseline", self.column, key, value, q),
                            comparison.group_quantile("candidate", self.column, key, value, q),
                            self.relative,
                        )
                    else:
                        sb, sc = gather(bv, groups[value]), gather(cv, groups[value])
                        point = point_delta(select_quantile(sb, q), select_quantile(sc, q), self.relative)
                    if self.relative and point.baseline <= 0:
                        continue
                    entry.update(baseline=point.baseline, candidate=point.candidate, delta=point.delta)
                    if point.delta > threshold:
                        if everything:
                            sb = comparison.in_group("baseline", self.column, key, value)
                            sc = comparison.in_group("candidate", self.column, key, value)
                        d = self._delta(comparison, sb, sc, q, seed + len(out) + 1)
                        if d is not None and d.ci_low is not None:
                            entry["ci"] = [d.ci_low, d.ci_high]
                            entry["regressed"] = d.ci_low > 0
                out.append(entry)
        return out

    def _next_action(self, segments: list[dict[str, Any]], overall: bool) -> str:
        regressed = sorted((s for s in segments if s["regressed"]), key=lambda s: -s["delta"])
        if regressed:
            worst = regressed[0]
            where = ", ".join(f"{s['key']}={s['value']}" for s in regressed)
            return (
                f"investigate the {self.label} of segment {where} first "
                f"(worst: {worst['key']}={worst['value']} {self._fmt(worst['delta'])}); "
                "compare its engine configuration with the baseline's"
            )
        return (
            f"profile the candidate's {self.label} tail: compare the slowest requests of both runs"
            if overall
            else "investigate the regressed segment"
        )

    def _aggregate(self, comparison: Comparison, q: float, threshold: float, min_pairs: int) -> SignalResult:
        """Run-level fallback: no pairs, no interval; a pass still needs the counts."""
        key = _qname(q)
        b = _aggregate_value(comparison.baseline.aggregates, self.aggregate, key)
        c = _aggregate_value(comparison.candidate.aggregates, self.aggregate, key)
        counts = [aggregate_count(s.aggregates) for s in (comparison.baseline, comparison.candidate)]
        n = min(counts)
        evidence = {
            "matched": 0,
            "baseline_requests": counts[0],
            "candidate_requests": counts[1],
            "min_pairs": min_pairs,
        }
        field = f"aggregates.{self.aggregate}" + (
            f".{key}" if key and self.aggregate != "memory_pressure" else ""
        )
        if b is None and c is None:
            return not_recorded(
                f"run.{field} and no per-request join was possible", threshold=threshold, evidence=evidence
            )
        if b is None or c is None:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message=f"no per-request join was possible and run.{field} is missing on "
                + (
                    "both sides"
                    if b is None and c is None
                    else "the baseline"
                    if b is None
                    else "the candidate"
                ),
                next_action=f"capture per-request observations, or report run.{field} on both sides",
            )
        if self.relative and b <= 0:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message=f"baseline run.{field} is 0",
                next_action="check the baseline capture",
            )
        delta = c / b - 1.0 if self.relative else c - b
        common: dict[str, Any] = {
            "baseline": b,
            "candidate": c,
            "delta": delta,
            "threshold": threshold,
            "unit": "relative" if self.relative else "absolute",
            "evidence": evidence,
        }
        head = (
            f"run-level {field} {b:.3f} -> {c:.3f}: {self._fmt(delta)}, threshold {self._fmt(threshold)} "
            "(no per-request join was possible; no confidence interval)"
        )
        if delta > threshold:
            return SignalResult(
                status="hold",
                reason="regression",
                message=head,
                next_action=f"profile the candidate's {self.label}; capture per-request "
                "observations to test significance",
                **common,
            )
        if n < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message=f"{head}; {plural(n, 'request')}",
                next_action=f"gate again with at least {min_pairs - n} more requests",
                **common,
            )
        return SignalResult(status="pass", reason="within_policy", message=head, **common)


def _aggregate_value(aggregates: dict[str, Any], name: str, key: str) -> float | None:
    value = aggregates.get(name)
    if isinstance(value, dict):
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


class LatencyP95(QuantileRegression):
    name = "latency-p95"
    description = "hold on a large and significant p95 end-to-end latency regression (paired bootstrap)"
    column = "latency_ms"
    label = "end-to-end latency (ms)"
    aggregate = "latency_ms"


class TtftP95(QuantileRegression):
    name = "ttft-p95"
    description = "hold on a large and significant p95 time-to-first-token regression"
    column = "ttft_ms"
    label = "time to first token (ms)"
    aggregate = "ttft_ms"


class DecodeTokenP95(QuantileRegression):
    name = "decode-token-p95"
    description = "hold on a large and significant regression of the per-request p95 inter-token gap"
    column = "itl_p95_ms"
    label = "per-request p95 inter-token latency (ms)"
    aggregate = "itl_ms"


class MemoryPressure(QuantileRegression):
    name = "memory-pressure"
    description = "hold when peak KV-cache pressure rises by more than the policy allows (absolute fraction)"
    column = "memory_pressure"
    label = "memory pressure (fraction of KV cache)"
    aggregate = "memory_pressure"
    relative = False
    default_threshold = 0.05
    options_schema = schema(
        {
            **BASE_OPTIONS,
            "threshold": {
                **FRACTION,
                "default": 0.05,
                "description": "absolute increase of the pressure quantile, 0.05 = +5 points",
            },
        }
    )
