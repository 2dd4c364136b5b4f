"""Output equality: exact fingerprints (``output-mismatch``) and numeric values
within scoped tolerances (``numeric-drift``). Both respond with rollback:
a deployment that answers differently is wrong, however fast it is.

Only pairs where neither side errored are compared (the error-rate signal
owns errors). A pair with nothing to compare is missing evidence: above
``max_missing_fraction`` it holds, never passes silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ..comparison import Comparison, gather
from ..stats import min_pairs_for_rate
from .common import FRACTION, id_text, ids, no_join, not_recorded, pct, schema

SCOPE_KEYS = ("model", "backend", "accelerator")
TOLERANCE = {"abs": {"type": "number", "minimum": 0}, "rel": {"type": "number", "minimum": 0}}


class OutputMismatch(GateSignal):
    name = "output-mismatch"
    description = "rollback when output fingerprints differ on more pairs than the policy allows"
    response = "rollback"
    options_schema = schema(
        {
            "max_mismatch_rate": {**FRACTION, "default": 0.0},
            "max_missing_fraction": {**FRACTION, "default": 0.0},
            "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.95},
        }
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        if not comparison.per_request:
            return no_join("output fingerprints can only be compared request by request")
        max_rate = float(self.options.get("max_mismatch_rate", 0.0))
        max_missing = float(self.options.get("max_missing_fraction", 0.0))
        min_pairs = min_pairs_for_rate(max_rate, float(self.options.get("confidence", 0.95)))
        ok = comparison.ok_pairs()
        bvals = comparison.aligned("baseline", "fingerprints")
        cvals = comparison.aligned("candidate", "fingerprints")
        if len(ok) != len(bvals):
            bvals, cvals = gather(bvals, ok), gather(cvals, ok)
        mismatched: list[str] = []
        missing: list[str] = []  # on one side only
        neither = 0  # recorded by neither side: nothing to compare, nothing against either run
        if bvals != cvals:  # equal lists hold None at the same places
            for p, b, c in zip(ok, bvals, cvals):
                if b is None or c is None:
                    if b is None and c is None:
                        neither += 1
                    else:
                        missing.append(comparison.pair_id(p))
                elif b != c:
                    mismatched.append(comparison.pair_id(p))
        else:
            neither = bvals.count(None)
        compared = len(ok) - len(missing) - neither
        evidence = {
            "matched": comparison.matched,
            "eligible": len(ok),
            "compared": compared,
            "mismatched": len(mismatched),
            "missing": len(missing),
            "recorded_by_neither": neither,
            "min_pairs": min_pairs,
        }
        if ok and not compared and not missing:
            return not_recorded(
                "output_fingerprint (the output text or its hash)", threshold=max_rate, evidence=evidence
            )
        rate = len(mismatched) / compared if compared else 0.0
        common: dict[str, Any] = {
            "baseline": 0.0,
            "candidate": rate,
            "delta": rate,
            "threshold": max_rate,
            "unit": "fraction",
            "evidence": evidence,
        }
        if compared and rate > max_rate:
            shown = ids(mismatched)
            return SignalResult(
                status="rollback",
                reason="mismatch",
                message=f"{len(mismatched)} of {compared} compared outputs differ ({pct(rate)} > {pct(max_rate)})",
                next_action=f"diff the outputs of request ids {id_text(shown, len(mismatched))} "
                "between baseline and candidate",
                details={"mismatched_ids": shown},
                **common,
            )
        if not compared or len(missing) > max_missing * len(ok):
            shown = ids(missing)
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                message=f"{len(missing)} of {len(ok)} eligible pairs have no output_fingerprint on one side"
                + ("" if ok else " (no pair without errors to compare)"),
                next_action=(
                    f"record output_fingerprint for request ids {id_text(shown, len(missing))}"
                    if missing
                    else "capture successful requests on both sides"
                ),
                details={"missing_ids": shown},
                **common,
            )
        if compared < min_pairs:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                message=f"only {compared} compared outputs; {min_pairs} are needed to show a mismatch rate "
                f"<= {pct(max_rate)}",
                next_action=f"gate again with at least {min_pairs - compared} more matched requests",
                **common,
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            message=f"{compared} outputs compared, {len(mismatched)} differ",
            **common,
        )


def _specificity(scope: Mapping[str, str]) -> tuple[int, int]:
    """More keys wins; on a tie model outranks backend outranks accelerator."""
    bits = sum(1 << (len(SCOPE_KEYS) - 1 - i) for i, k in enumerate(SCOPE_KEYS) if k in scope)
    return (len(scope), bits)


def scope_label(scope: Mapping[str, str]) -> str:
    return ",".join(f"{k}={scope[k]}" for k in SCOPE_KEYS if k in scope) or "default"


class NumericDrift(GateSignal):
    name = "numeric-drift"
    description = "rollback when numeric outputs differ beyond the tolerance of their (model, backend, accelerator) scope"
    response = "rollback"
    options_schema = schema(
        {
            "default": schema(TOLERANCE),
            "tolerances": {
                "type": "array",
                "items": schema(
                    {
                        "scope": {
                            **schema({k: {"type": "string", "minLength": 1} for k in SCOPE_KEYS}),
                            "minProperties": 1,
                        },
                        **TOLERANCE,
                    },
                    required=["scope"],
                ),
            },
            "max_drift_rate": {**FRACTION, "default": 0.0},
            "max_missing_fraction": {**FRACTION, "default": 0.0},
        }
    )

    def configure(self, options: dict[str, Any]) -> None:
        super().configure(options)
        default = options.get("default", {})
        self.scopes: list[tuple[dict[str, str], float, float]] = [
            ({}, float(default.get("abs", 0.0)), float(default.get("rel", 0.0)))
        ]
        seen: dict[str, int] = {}
        for i, entry in enumerate(options.get("tolerances", [])):
            scope = dict(entry["scope"])
            label = scope_label(scope)
            if label in seen:
                raise ValueError(f"tolerances[{i}] repeats the scope {label} of tolerances[{seen[label]}]")
            seen[label] = i
            self.scopes.append((scope, float(entry.get("abs", 0.0)), float(entry.get("rel", 0.0))))
        # most specific first; stable on policy order for identical specificity
        self.scopes.sort(key=lambda s: _specificity(s[0]), reverse=True)

    def resolve(self, model: str | None, backend: str | None, accelerator: str | None) -> int:
        """Index (into ``self.scopes``) of the most specific scope that matches."""
        have = {"model": model, "backend": backend, "accelerator": accelerator}
        for i, (scope, _, _) in enumerate(self.scopes):
            if all(have[k] == v for k, v in scope.items()):
                return i
        raise AssertionError("the default scope matches everything")  # pragma: no cover

    def evaluate(self, comparison: Comparison) -> SignalResult:
        if not comparison.per_request:
            return no_join("numeric outputs can only be compared request by request")
        max_rate = float(self.options.get("max_drift_rate", 0.0))
        max_missing = float(self.options.get("max_missing_fraction", 0.0))
        bv, cv = comparison.baseline.values, comparison.candidate.values
        pb, pc = comparison.pairs_b, comparison.pairs_c
        keys = [comparison.segment_values(k) for k in ("model", "backend", "accelerator")]
        ok = comparison.ok_pairs()
        cache: dict[tuple[Any, ...], int] = {}
        stats = [{"pairs": 0, "drifted": 0, "max_abs_diff": 0.0, "max_rel_diff": 0.0} for _ in self.scopes]
        drifted: list[tuple[str, str]] = []
        missing: list[str] = []  # on one side only
        neither = 0  # recorded by neither side: nothing to compare, nothing against either run
        for p in ok:
            b, c = bv[pb[p]], cv[pc[p]]
            if b is None or c is None:
                if b is None and c is None:
                    neither += 1
                else:
                    missing.append(comparison.pair_id(p))
                continue
            triple = (keys[0][p], keys[1][p], keys[2][p])
            s = cache.get(triple)
            if s is None:
                s = cache[triple] = self.resolve(*triple)
            _, atol, rtol = self.scopes[s]
            st = stats[s]
            st["pairs"] += 1
            bad = len(b) != len(c)
            for x, y in zip(b, c):
                diff = abs(x - y)
                scale = max(abs(x), abs(y))
                rel = diff / scale if scale else 0.0
                if diff > st["max_abs_diff"]:
                    st["max_abs_diff"] = diff
                if rel > st["max_rel_diff"]:
                    st["max_rel_diff"] = rel
                if diff > max(atol, rtol * scale):
                    bad = True
            if bad:
                st["drifted"] += 1
                drifted.append((comparison.pair_id(p), scope_label(self.scopes[s][0])))
        compared = len(ok) - len(missing) - neither
        scopes: list[dict[str, Any]] = [
            {"scope": scope_label(scope), "abs": atol, "rel": rtol, **stats[i]}
            for i, (scope, atol, rtol) in enumerate(self.scopes)
            if stats[i]["pairs"]
        ]
        scopes.sort(key=lambda s: s["scope"])
        rate = len(drifted) / compared if compared else 0.0
        evidence = {
            "matched": comparison.matched,
            "eligible": len(ok),
            "compared": compared,
            "drifted": len(drifted),
            "missing": len(missing),
            "recorded_by_neither": neither,
        }
        common: dict[str, Any] = {
            "baseline": 0.0,
            "candidate": rate,
            "delta": rate,
            "threshold": max_rate,
            "unit": "fraction",
            "evidence": evidence,
        }
        if compared and rate > max_rate:
            drifted.sort()
            shown = drifted[:20]
            worst = sorted({label for _, label in drifted})
            return SignalResult(
                status="rollback",
                reason="drift",
                message=f"{len(drifted)} of {compared} numeric outputs drift beyond tolerance "
                f"({pct(rate)} > {pct(max_rate)}); scopes applied: {', '.join(worst)}",
                next_action=f"diff output_values of request ids {id_text([i for i, _ in shown], len(drifted))}"
                "; if the drift is expected on this hardware, set a tolerance for that scope",
                details={"scopes": scopes, "drifted": [{"request_id": i, "scope": s} for i, s in shown]},
                **common,
            )
        if ok and not compared and not missing:
            return not_recorded("output_values", threshold=max_rate, evidence=evidence)
        if not compared or len(missing) > max_missing * len(ok):
            shown_ids = ids(missing)
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                message=f"{len(missing)} of {len(ok)} eligible pairs have no output_values on one side",
                next_action=(
                    f"record output_values for request ids {id_text(shown_ids, len(missing))}"
                    if missing
                    else "capture successful requests on both sides"
                ),
                details={"scopes": scopes, "missing_ids": shown_ids},
                **common,
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            message=f"{compared} numeric outputs within tolerance",
            details={"scopes": scopes},
            **common,
        )
