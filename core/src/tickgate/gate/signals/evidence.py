"""Evidence signals: was the candidate exercised the way the policy requires?
Missing route, scheduler or streaming evidence and too little matched traffic
(overall or in any segment) all respond with hold: absence of evidence is
never a pass.
"""

from __future__ import annotations

from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ...util.words import plural
from ..comparison import Comparison
from ..observations import COMPLETE_STREAM, NO_STREAM, Side
from .common import (
    DEFAULT_SEGMENT_KEYS,
    FRACTION,
    SEGMENT_KEYS,
    aggregate_count,
    id_text,
    ids,
    no_join,
    pct,
    schema,
)

NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "uniqueItems": True}


def _count_by(comparison: Comparison, key: str) -> dict[str, int]:
    """Matched pairs per segment value (values in order of first appearance),
    from the comparison's groups: other signals and the segment summaries
    build them anyway."""
    return dict(comparison.group_sizes(key))  # a copy: callers add the values without pairs


class RouteEvidence(GateSignal):
    name = "route-evidence"
    description = "hold unless every required route has matched traffic"
    options_schema = schema(
        {"required": NAMES, "min_pairs_per_route": {"type": "integer", "minimum": 1, "default": 1}},
        required=["required"],
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        if not comparison.per_request:
            return no_join("routes are only known per request")
        need = int(self.options.get("min_pairs_per_route", 1))
        counts = _count_by(comparison, "route")
        required = sorted(self.options["required"])
        short = [r for r in required if counts.get(r, 0) < need]
        evidence = {
            "matched": comparison.matched,
            "routes_required": len(required),
            "routes_missing": len(short),
        }
        details = {"route_pairs": {r: counts.get(r, 0) for r in required}}
        if short:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                evidence=evidence,
                details=details,
                message=f"required route{'s' if len(short) > 1 else ''} without {need}+ matched pairs: "
                + ", ".join(f"{r} ({counts.get(r, 0)})" for r in short),
                next_action=f"send traffic to {', '.join(short)} on both deployments and record 'route'",
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            evidence=evidence,
            details=details,
            message=f"all {len(required)} required routes have matched traffic",
        )


class SchedulerEvidence(GateSignal):
    name = "scheduler-evidence"
    description = "hold unless both sides name their scheduler (and the candidate uses the required ones)"
    options_schema = schema({"required": NAMES})

    def evaluate(self, comparison: Comparison) -> SignalResult:
        required = sorted(self.options.get("required", []))
        if comparison.per_request:
            missing_b = _unnamed(comparison.baseline, comparison.pairs_b)
            missing_c = _unnamed(comparison.candidate, comparison.pairs_c)
            cat = comparison.candidate.cats["scheduler"]
            seen = sorted({cat.values[c] for c in (cat.codes[r] for r in comparison.pairs_c) if c >= 0})
            unnamed = sorted(
                {comparison.baseline.ids[r] for r in missing_b}
                | {comparison.candidate.ids[r] for r in missing_c}
            )
        else:
            seen = [s for s in [comparison.candidate.run.get("scheduler")] if isinstance(s, str)]
            unnamed = [
                side.label
                for side in (comparison.baseline, comparison.candidate)
                if not isinstance(side.run.get("scheduler"), str)
            ]
        absent = [s for s in required if s not in seen]
        evidence = {"matched": comparison.matched, "unnamed": len(unnamed), "required_absent": len(absent)}
        details: dict[str, Any] = {"candidate_schedulers": seen}
        if not comparison.matched and comparison.per_request:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                evidence=evidence,
                details=details,
                message="no matched requests carry scheduler evidence",
                next_action="send the same traffic (same request ids) to both deployments",
            )
        if unnamed or absent:
            parts = []
            if unnamed:
                shown = ids(unnamed)
                details["unnamed"] = shown
                parts.append(
                    f"{len(unnamed)} {'requests' if comparison.per_request else 'runs'} name no "
                    f"scheduler ({id_text(shown, len(unnamed))})"
                )
            if absent:
                parts.append(
                    f"required scheduler{'s' if len(absent) > 1 else ''} {', '.join(absent)} not seen "
                    f"in the candidate (seen: {', '.join(seen) or 'none'})"
                )
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                evidence=evidence,
                details=details,
                message="; ".join(parts),
                next_action="record 'scheduler' (per request or in run.scheduler) on both sides"
                + (f" and run the candidate with {', '.join(absent)}" if absent else ""),
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            evidence=evidence,
            details=details,
            message=f"scheduler evidence present ({', '.join(seen) or 'run-level'})",
        )


def _unnamed(side: Side, rows: Any) -> list[int]:
    codes = side.cats["scheduler"].codes
    return [r for r in rows if codes[r] < 0]


class StreamingEvidence(GateSignal):
    name = "streaming-evidence"
    description = "hold unless matched successful requests carry complete token-stream evidence"
    options_schema = schema(
        {
            "sides": {
                "type": "array",
                "items": {"enum": ["baseline", "candidate"]},
                "minItems": 1,
                "uniqueItems": True,
                "default": ["baseline", "candidate"],
            },
            "max_incomplete_fraction": {**FRACTION, "default": 0.0},
        }
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        if not comparison.per_request:
            return no_join("streaming evidence is per request")
        sides = sorted(self.options.get("sides", ["baseline", "candidate"]))
        limit = float(self.options.get("max_incomplete_fraction", 0.0))
        ok = comparison.ok_pairs()
        absent: list[str] = []
        cut: list[str] = []
        for p in ok:
            states = []
            if "baseline" in sides:
                states.append(comparison.baseline.streaming[comparison.pairs_b[p]])
            if "candidate" in sides:
                states.append(comparison.candidate.streaming[comparison.pairs_c[p]])
            if NO_STREAM in states:
                absent.append(comparison.pair_id(p))
            elif any(s != COMPLETE_STREAM for s in states):
                cut.append(comparison.pair_id(p))
        bad = len(absent) + len(cut)
        evidence = {
            "matched": comparison.matched,
            "eligible": len(ok),
            "without_stream": len(absent),
            "incomplete_stream": len(cut),
        }
        frac = bad / len(ok) if ok else 1.0
        common: dict[str, Any] = {
            "candidate": frac,
            "threshold": limit,
            "unit": "fraction",
            "evidence": evidence,
        }
        if not ok:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message="no successful matched pairs",
                next_action="send the same traffic to both deployments",
                **common,
            )
        if bad and frac > limit:
            shown_a, shown_c = ids(absent), ids(cut)
            parts = []
            if absent:
                parts.append(f"{len(absent)} without streaming evidence ({id_text(shown_a, len(absent))})")
            if cut:
                parts.append(f"{len(cut)} with a cut stream ({id_text(shown_c, len(cut))})")
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                message=f"{pct(frac)} of {len(ok)} pairs lack complete streaming evidence on "
                f"{' and '.join(sides)}: " + "; ".join(parts),
                next_action="capture the token streams (SSE or token events) of these requests to the end",
                details={"without_stream": shown_a, "incomplete_stream": shown_c},
                **common,
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            message=f"{len(ok) - bad} of {len(ok)} pairs have complete streams",
            **common,
        )


class MatchedTraffic(GateSignal):
    name = "matched-traffic"
    description = "hold when too few requests were matched, overall or in any segment"
    options_schema = schema(
        {
            "min_matched": {"type": "integer", "minimum": 1, "default": 200},
            "min_per_segment": {"type": "integer", "minimum": 1, "default": 30},
            "segment_keys": {**SEGMENT_KEYS, "default": DEFAULT_SEGMENT_KEYS},
            "max_unmatched_fraction": {**FRACTION, "default": 0.05},
            "allow_aggregate_only": {"type": "boolean", "default": False},
        }
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        o = self.options
        min_matched = int(o.get("min_matched", 200))
        if not comparison.per_request:
            return self._aggregate(comparison, min_matched)
        min_seg = int(o.get("min_per_segment", 30))
        n = comparison.matched
        bo, co = comparison.baseline_only, comparison.candidate_only
        different = comparison.prompt_mismatches
        total = n + len(bo) + len(co)
        unmatched = (len(bo) + len(co)) / total if total else 0.0
        short_segments = []
        for key in o.get("segment_keys", DEFAULT_SEGMENT_KEYS):
            counts = _count_by(comparison, key)
            for side in (comparison.baseline, comparison.candidate):
                cat = side.cats.get(key)
                for value in cat.values if cat else []:
                    counts.setdefault(value, 0)
            for value in sorted(counts):
                if counts[value] < min_seg:
                    short_segments.append(
                        {
                            "key": key,
                            "value": value,
                            "matched": counts[value],
                            "needed": min_seg - counts[value],
                        }
                    )
        evidence = {
            "matched": n,
            "baseline_only": len(bo),
            "candidate_only": len(co),
            "min_matched": min_matched,
            "segments_short": len(short_segments),
            "prompt_mismatches": len(different),
        }
        common: dict[str, Any] = {
            "candidate": float(n),
            "threshold": float(min_matched),
            "unit": "requests",
            "evidence": evidence,
        }
        problems, actions = [], []
        details: dict[str, Any] = {"short_segments": short_segments}
        if different:
            rid, b, c = different[0]
            problems.append(
                f"{len(different)} request id{'s' if len(different) > 1 else ''} name different "
                f"prompts on the two sides (first: {rid}: baseline {b}, candidate {c}): the runs "
                "did not send the same traffic under the same keys, these are not the same "
                "requests, and no pair was compared"
            )
            actions.append(
                "run both sides on the same dataset with the same seed and request count "
                "(the join key is the client's dataset position or conversation/turn)"
            )
            details["prompt_mismatches"] = [
                {"request_id": r, "baseline": pb, "candidate": pc} for r, pb, pc in different[:20]
            ]
        if n < min_matched:
            problems.append(f"{n} matched requests, {min_matched} required")
            actions.append(f"gate again with at least {min_matched - n} more matched requests")
        if short_segments:
            problems.append(
                "segments below "
                f"{min_seg} matched: "
                + ", ".join(f"{s['key']}={s['value']} ({s['matched']})" for s in short_segments[:10])
            )
            actions.append(
                "send more traffic to "
                + ", ".join(f"{s['key']}={s['value']} (+{s['needed']})" for s in short_segments[:10])
            )
        if unmatched > float(o.get("max_unmatched_fraction", 0.05)):
            problems.append(
                f"{pct(unmatched)} of requests unmatched ({len(bo)} baseline-only, {len(co)} candidate-only)"
            )
            actions.append(
                "replay the same request ids on both sides; unmatched: "
                + id_text(ids(bo + co, 10), len(bo) + len(co))
            )
        if problems:
            return SignalResult(
                status="hold",
                reason="mismatched_requests" if different else "insufficient_data",
                message="; ".join(problems),
                next_action="; ".join(actions),
                details=details,
                **common,
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            message=f"{n} matched requests; every segment has at least {min_seg}",
            **common,
        )

    def _aggregate(self, comparison: Comparison, min_matched: int) -> SignalResult:
        counts = [aggregate_count(s.aggregates) for s in (comparison.baseline, comparison.candidate)]
        evidence = {
            "matched": 0,
            "baseline_requests": counts[0],
            "candidate_requests": counts[1],
            "min_matched": min_matched,
        }
        if not self.options.get("allow_aggregate_only", False):
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=float(min_matched),
                evidence=evidence,
                message="no per-request join was possible: at least one side has only run aggregates, "
                "and this policy does not accept aggregate-only evidence",
                next_action="capture per-request observations with request ids on both sides "
                "(or set allow_aggregate_only in the matched-traffic options)",
            )
        if min(counts) < min_matched:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                threshold=float(min_matched),
                evidence=evidence,
                candidate=float(min(counts)),
                unit="requests",
                message=f"aggregate-only runs of {counts[0]} and {plural(counts[1], 'request')}; {min_matched} required",
                next_action=f"gate again with at least {min_matched - min(counts)} more requests per side",
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            threshold=float(min_matched),
            evidence=evidence,
            candidate=float(min(counts)),
            unit="requests",
            message=f"aggregate-only runs of {counts[0]} and {plural(counts[1], 'request')} "
            "(no per-request join was possible)",
        )
