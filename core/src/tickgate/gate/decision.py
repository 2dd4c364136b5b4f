"""Run the configured signals and combine them into one decision.

The worst status decides: rollback outranks hold outranks inconclusive
outranks pass (promote); an inconclusive worst becomes what the policy's
``gate.inconclusive`` says (by default its own decision, exit 11).
Dry-run signals are evaluated and reported but never decide. A signal whose
evidence neither side has is ``not_evaluated``: reported with its reason,
never deciding, unless the policy marks it ``required`` (then it holds). A signal that
raises or returns something other than a valid :class:`SignalResult` is an
error naming the plugin and its distribution: the gate never guesses.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from ..interfaces.gate import RANK, SignalResult
from ..util.errors import PluginError
from ..util.progress import OFF, Progress
from .comparison import Comparison
from .config import ConfiguredSignal, GateConfig

DECISIONS = {"pass": "promote", "hold": "hold", "rollback": "rollback"}  # inconclusive: the policy says


@attrs.frozen
class Outcome:
    configured: ConfiguredSignal
    result: SignalResult


def _check(configured: ConfiguredSignal, result: Any) -> SignalResult:
    label = configured.info.label("gate signal")
    if not isinstance(result, SignalResult):
        raise PluginError(f"{label} returned {type(result).__name__}, not a SignalResult")
    try:
        attrs.validate(result)
        if result.ci is not None:
            lo, hi = result.ci
            if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (lo, hi)) or lo > hi:
                raise ValueError(f"ci must be two finite numbers low <= high, got {result.ci!r}")
        for key, value in result.evidence.items():
            if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"evidence must map names to integer counts, got {key!r}: {value!r}")
        json.dumps(result.details, allow_nan=False, sort_keys=True)
    except (ValueError, TypeError) as exc:
        raise PluginError(f"{label} returned invalid data: {exc}") from None
    return result


def evaluate(config: GateConfig, comparison: Comparison, progress: Progress = OFF) -> list[Outcome]:
    """Every configured signal's result, in policy order; ``progress`` counts the
    signals (on a terminal: a signal over a million pairs takes seconds)."""
    outcomes = []
    for configured in config.signals:
        try:
            result = configured.signal.evaluate(comparison)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"{configured.info.label('gate signal')} failed: {type(exc).__name__}: {exc}"
            ) from exc
        result = _check(configured, result)
        if result.status == "not_evaluated" and configured.required:
            result = attrs.evolve(
                result,
                status="hold",
                reason="missing_evidence",
                message=f"required, but {result.message}",
                next_action=result.next_action or "record the evidence this signal needs",
            )
        outcomes.append(Outcome(configured, result))
        progress.step(configured.id)
    return outcomes


def decide(outcomes: list[Outcome], inconclusive: str = "inconclusive") -> str:
    """Worst deciding status; with no deciding signal at all (every one
    dry-run or not evaluated) there is no evidence, so the gate holds instead
    of promoting. When the worst is ``inconclusive``, the policy's
    ``gate.inconclusive`` says what that makes of the release."""
    deciding = [o for o in outcomes if not o.configured.dry_run and o.result.status != "not_evaluated"]
    if not deciding:
        return "hold"
    worst = max((o.result.status for o in deciding), key=RANK.__getitem__)
    if worst == "inconclusive":
        return inconclusive
    return DECISIONS[worst]
