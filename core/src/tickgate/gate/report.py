"""Assemble the gate report: decision first, then one entry per signal, the
triage (every failed signal with its numbers and next action), the join and
the segment summaries. Every float is rounded and every list sorted, so the
bytes depend only on the inputs, the policy and its seed.
"""

from __future__ import annotations

from typing import Any

from ..interfaces.gate import RANK
from .comparison import Comparison
from .config import GateConfig
from .decision import Outcome, decide
from .observations import Side

#: documented in docs/gate.md; distinct from 2 (invalid input) and 3 (internal error)
EXIT_CODES = {"promote": 0, "inconclusive": 11, "hold": 10, "rollback": 20}
UNMATCHED_LIMIT = 100


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) + 0.0
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def _side(side: Side) -> dict[str, Any]:
    run = side.run
    prov = run.get("provenance") or {}
    out: dict[str, Any] = {"file": side.path, "format": prov.get("format", "neutral"), "requests": len(side)}
    for key in ("label", "backend", "model", "accelerator", "scheduler"):
        if isinstance(run.get(key), str):
            out[key] = run[key]
    if prov:
        out["provenance"] = prov
    if not side.has_requests:
        out["aggregate_only"] = True
    return out


def _signal(outcome: Outcome) -> dict[str, Any]:
    c, r = outcome.configured, outcome.result
    out: dict[str, Any] = {
        "id": c.id,
        "signal": c.info.name,
        "distribution": c.info.distribution,
        "dry_run": c.dry_run,
        "status": r.status,
        "reason": r.reason,
        "message": r.message,
        "baseline": r.baseline,
        "candidate": r.candidate,
        "delta": r.delta,
        "threshold": r.threshold,
        "unit": r.unit,
        "confidence_interval": list(r.ci) if r.ci is not None else None,
        "confidence": r.confidence,
        "evidence": dict(sorted(r.evidence.items())),
    }
    if r.next_action and r.status != "pass":
        out["next_action"] = r.next_action
    if r.details:
        out["details"] = r.details
    return out


def build_report(
    config: GateConfig, comparison: Comparison, outcomes: list[Outcome], segments: dict[str, Any]
) -> dict[str, Any]:
    decision = decide(outcomes, config.inconclusive)
    triage: list[dict[str, Any]] = []
    not_evaluated: list[dict[str, Any]] = [
        {"signal": o.configured.id, "dry_run": o.configured.dry_run, "message": o.result.message}
        for o in outcomes
        if o.result.status == "not_evaluated"
    ]
    for o in outcomes:
        if o.result.status in ("pass", "not_evaluated"):
            continue
        r = o.result
        triage.append(
            {
                "signal": o.configured.id,
                "status": r.status,
                "dry_run": o.configured.dry_run,
                "reason": r.reason,
                "message": r.message,
                "baseline": r.baseline,
                "candidate": r.candidate,
                "delta": r.delta,
                "threshold": r.threshold,
                "next_action": r.next_action or "see the signal's message",
            }
        )
    triage.sort(key=lambda t: (t["dry_run"], -RANK[t["status"]], t["signal"]))
    notes = []
    if not comparison.per_request:
        notes.append(
            "no per-request join was possible: at least one side has only run aggregates; "
            "signals compared run-level figures without confidence intervals"
        )
    if not any(not o.configured.dry_run for o in outcomes):
        notes.append("every signal is dry-run: nothing decided, so the gate holds")
    elif not any(not o.configured.dry_run and o.result.status != "not_evaluated" for o in outcomes):
        notes.append(
            "no deciding signal could be evaluated (neither side has their evidence), so the gate holds"
        )
    deciding = [t for t in triage if not t["dry_run"]]
    if decision == "promote" and deciding:  # only inconclusive signals, and the policy promotes them
        summary = "promote: " + "; ".join(f"{t['signal']} {t['status']}" for t in deciding)
        summary += " (the policy's gate.inconclusive is promote)"
    elif decision == "promote":
        summary = (
            "promote: complete evidence within policy"
            if not not_evaluated
            else "promote: every evaluated signal within policy (not evaluated: "
            + ", ".join(n["signal"] for n in not_evaluated)
            + ")"
        )
    elif deciding:
        summary = f"{decision}: " + "; ".join(f"{t['signal']} {t['status']}" for t in deciding)
    elif not_evaluated and any(not o.configured.dry_run for o in outcomes):
        summary = "hold: no deciding signal could be evaluated"
    else:
        summary = "hold: no signal may decide (all are dry-run)"
    bo, co = comparison.baseline_only, comparison.candidate_only
    report = {
        "kind": "tickgate.gate-report",
        "version": 1,
        "decision": decision,
        "exit_code": EXIT_CODES[decision],
        "summary": summary,
        "triage": triage,
        **({"not_evaluated": not_evaluated} if not_evaluated else {}),
        "notes": notes,
        "signals": [_signal(o) for o in outcomes],
        "join": {
            "per_request": comparison.per_request,
            "matched": comparison.matched,
            "baseline_only": {"count": len(bo), "ids": bo[:UNMATCHED_LIMIT]},
            "candidate_only": {"count": len(co), "ids": co[:UNMATCHED_LIMIT]},
            **(
                {
                    "prompt_mismatches": {
                        "count": len(comparison.prompt_mismatches),
                        "pairs": [
                            {"request_id": r, "baseline": b, "candidate": c}
                            for r, b, c in comparison.prompt_mismatches[:UNMATCHED_LIMIT]
                        ],
                    }
                }
                if comparison.prompt_mismatches
                else {}
            ),
        },
        "segments": segments,
        "inputs": {
            "policy": config.policy_path,
            "seed": config.seed,
            "inconclusive": config.inconclusive,
            "baseline": _side(comparison.baseline),
            "candidate": _side(comparison.candidate),
        },
    }
    return _round(report)
