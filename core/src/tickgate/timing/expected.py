"""Gate signal ``expected-performance``: the candidate against what its hardware should do.

The other latency signals compare a candidate with a baseline run of the same traffic. This one
needs no baseline: it replays the candidate's own requests (what the benchmark client sent: prompt
and output lengths, send times or concurrency) under the deployment's policy and a fitted timing
file (``tickgate timing fit``), exactly as ``tickgate timing check`` does (:mod:`.run_check`), and
holds when a measured percentile (TTFT or per-request ITL, p50 or p95) is worse than the replay
predicts by more than ``threshold`` (relative). So an engine upgrade that makes the hardware slower
than it was calibrated to be is caught even when the baseline ran other traffic.

It lives in :mod:`tickgate.timing`, not with the other signals in :mod:`tickgate.gate`: the replay
it needs sits above the gate in the layers (pyproject ``[tool.importlinter]``).

Paths in the options are relative to the current directory (a signal's ``build`` is given its
options, not the policy file they came from); absolute paths work from anywhere. A missing or
malformed deployment or timing file is an error located at the signal's options when the policy is
loaded, before anything is read.

The interval: a seeded bootstrap over the joined requests of the measured percentile, divided by the
predicted one (the replay is deterministic); it is reported, the decision is on the point ratio.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..interfaces.gate import GateSignal, SignalResult
from ..util.errors import TickgateError
from ..util.quantile import quantile

METRICS = {
    "ttft_p50": ("ttft_ms", 0.5),
    "ttft_p95": ("ttft_ms", 0.95),
    "itl_p50": ("itl_ms", 0.5),
    "itl_p95": ("itl_ms", 0.95),
}
DEFAULT_METRICS = list(METRICS)
RESAMPLES = 200
CONFIDENCE = 0.95
#: fewer joined requests than this: too few to judge a p95 (the bootstrap interval says how well)
MIN_REQUESTS = 50


class ExpectedPerformance(GateSignal):
    name = "expected-performance"
    description = "candidate's TTFT/ITL p50/p95 vs a replay of its own traffic under a fitted deployment (holds when slower)"
    response = "hold"
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["deployment"],
        "properties": {
            "deployment": {"type": "string", "minLength": 1, "description": "the deployment's policy file"},
            "timing": {"type": "string", "minLength": 1, "description": "a fitted timing file (timing fit)"},
            "threshold": {
                "type": "number",
                "minimum": 0,
                "default": 0.1,
                "description": "relative: 0.1 holds when measured > 1.1 x predicted",
            },
            "metrics": {
                "type": "array",
                "items": {"enum": DEFAULT_METRICS},
                "minItems": 1,
                "uniqueItems": True,
                "default": DEFAULT_METRICS,
            },
            "min_requests": {"type": "integer", "minimum": 1, "default": MIN_REQUESTS},
        },
    }

    def configure(self, options: dict[str, Any]) -> None:
        """Read the deployment (and timing) now, so a bad file is an error at load time, located at
        the options (the gate turns a ``ValueError`` from ``build`` into one)."""
        from .run_check import deployment_policy

        self.options = options
        deployment = Path(options["deployment"])
        timing = Path(options["timing"]) if options.get("timing") else None
        for label, path in (("deployment", deployment), ("timing", timing)):
            if path is not None and not path.is_file():
                raise ValueError(f"{label}: file not found: {path} (relative to the current directory)")
        try:
            self.policy, self.origin = deployment_policy(deployment, timing)
        except TickgateError as exc:
            raise ValueError(str(exc)) from None
        self.threshold = float(options.get("threshold", 0.1))
        self.metrics = list(options.get("metrics") or DEFAULT_METRICS)
        self.min_requests = int(options.get("min_requests", MIN_REQUESTS))

    def evaluate(self, comparison: Any) -> SignalResult:
        from .run_check import join, load_run

        path = Path(comparison.candidate.path)
        try:
            rows, flags = join(load_run(path, "auto"), self.policy, self.origin)
        except TickgateError as exc:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=self.threshold,
                message=f"the candidate cannot be replayed: {exc}",
                next_action="gate a benchmark client's per-request output tickgate imports (tickgate import --help)",
            )
        evidence = {"requests": len(rows), "flags": len(flags), "min_requests": self.min_requests}
        if len(rows) < self.min_requests:
            return SignalResult(
                status="hold",
                reason="insufficient_data",
                threshold=self.threshold,
                evidence=evidence,
                message=f"{len(rows)} candidate requests joined with the replay; at least {self.min_requests} are needed",
                next_action=f"gate a run of at least {self.min_requests} successful requests",
            )
        rng = random.Random(comparison.seed_for(self.name))
        figures = {m: self._figure(rows, m, rng) for m in self.metrics}
        missing = [m for m, f in figures.items() if f is None]
        if missing:
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=self.threshold,
                evidence=evidence,
                message=f"no measured and predicted {', '.join(missing)} (the run records no inter-token gaps?)",
                next_action="gate a run whose client records per-request TTFT and inter-token latencies",
            )
        table = {m: f for m, f in figures.items() if f is not None}
        worst = max(table, key=lambda m: (table[m]["ratio"], m))
        w = table[worst]
        over = sorted(m for m in table if table[m]["ratio"] - 1 > self.threshold)
        text = (
            f"{worst}: measured {w['measured']:.3f} ms, predicted {w['predicted']:.3f} ms, "
            f"ratio {w['ratio']:.3f}" + (f" [{w['ci'][0]:.3f}, {w['ci'][1]:.3f}]" if w["ci"] else "")
        )
        common: dict[str, Any] = {
            "baseline": w["predicted"],
            "candidate": w["measured"],
            "delta": w["ratio"] - 1,
            "threshold": self.threshold,
            "unit": "relative",
            "ci": (w["ci"][0] - 1, w["ci"][1] - 1) if w["ci"] else None,
            "confidence": CONFIDENCE if w["ci"] else None,
            "evidence": evidence,
            "details": {"metrics": table, "worst": worst, "over_threshold": over, "flags": flags[:20]},
        }
        if over:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"slower than the deployment predicts by more than {self.threshold:.0%}: {text}"
                + (f" (also {', '.join(m for m in over if m != worst)})" if len(over) > 1 else ""),
                next_action="compare the engine build and flags with those the timing was fitted on; "
                "refit (tickgate timing fit) if the hardware changed on purpose",
                **common,
            )
        return SignalResult(
            status="pass",
            reason="within_policy",
            message=f"within {self.threshold:.0%} of the deployment's prediction; worst {text}",
            **common,
        )

    def _figure(
        self, rows: Sequence[Mapping[str, Any]], metric: str, rng: random.Random
    ) -> dict[str, Any] | None:
        column, q = METRICS[metric]
        pairs = [
            (r["measured"][column], r["predicted"][column])
            for r in rows
            if r["measured"][column] is not None and r["predicted"][column] is not None
        ]
        if not pairs:
            return None
        measured = quantile(sorted(m for m, _ in pairs), q)
        predicted = quantile(sorted(p for _, p in pairs), q)
        if predicted <= 0:
            return None
        values = [m for m, _ in pairs]
        n = len(values)
        boot = sorted(quantile(sorted(rng.choices(values, k=n)), q) / predicted for _ in range(RESAMPLES))
        tail = (1 - CONFIDENCE) / 2
        ci = [round(quantile(boot, tail), 6), round(quantile(boot, 1 - tail), 6)]
        return {
            "measured": round(measured, 6),
            "predicted": round(predicted, 6),
            "ratio": round(measured / predicted, 6),
            "ci": ci,
            "requests": n,
        }
