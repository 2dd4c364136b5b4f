"""The gate-signal protocol: what a signal plugin is given and must return.

A signal is a class registered through ``register_gate_signals``::

    class MySignal(GateSignal):
        name = "my-signal"               # what a policy's gate.signals[].name selects
        description = "one line for `tickgate plugins`"
        response = "hold"                # status when the check fails
        options_schema = {...}           # JSON Schema of its options (validated, located)

        @classmethod
        def build(cls, options): ...     # -> configured instance
        def evaluate(self, comparison):  # tickgate.gate.comparison.Comparison -> SignalResult

``evaluate`` must be deterministic (seed from ``comparison.seed_for(id)``) and
must fail closed: evidence it cannot read is a ``hold`` (reason
``missing_evidence`` or ``insufficient_data``), never a ``pass``. The one
exception is evidence that *neither* side has for any pair (no benchmark
client records KV pressure, say): then the signal returns ``not_evaluated``
with the reason, which is reported but does not decide, unless the policy
marks the signal ``required: true`` (then it holds). Returning
anything but a valid :class:`SignalResult`, or raising, is reported as an error
naming the plugin and its distribution.

Both the base class, :class:`GateSignal`, and :class:`SignalResult` live here,
the gate's part of the plugin contract; plugin authors import both names from
``tickgate``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from .plugin import Plugin


class GateSignal(Plugin):
    """One release-gate check (the protocol: :mod:`tickgate.interfaces.gate`).

    ``build(options)`` returns a configured signal (this base stores the
    validated options as ``self.options``); ``evaluate(comparison)`` gets a
    :class:`tickgate.gate.comparison.Comparison` (baseline and candidate joined by
    request id, column by column) and returns a
    :class:`tickgate.interfaces.gate.SignalResult` (status ``pass``/``hold``/
    ``rollback``, reason, baseline/candidate/delta/threshold, confidence
    interval, evidence counts, next action, details). See docs/gate.md.
    Subclassing is optional: matching the protocol is enough.
    """

    #: the status the signal gives when its check fails
    response: ClassVar[str] = "hold"

    @classmethod
    def build(cls, options: Mapping[str, Any]) -> GateSignal:
        signal = cls()
        signal.configure(dict(options))
        return signal

    def configure(self, options: dict[str, Any]) -> None:
        """Store validated options (defaults already applied by the schema's author)."""
        self.options = options

    def evaluate(self, comparison: Any) -> SignalResult:
        raise NotImplementedError


STATUSES = ("pass", "inconclusive", "hold", "rollback", "not_evaluated")
#: decision rank: the worst status decides (rollback > hold > inconclusive > pass); a
#: signal that was not evaluated does not take part (see ``gate.decision.decide``).
#: ``inconclusive``: a change as large as the threshold that the data cannot tell from
#: noise (Argo Rollouts' Inconclusive, Kayenta's marginal): what it means for the
#: release is the policy's ``gate.inconclusive`` (its own exit code by default)
RANK = {"not_evaluated": -1, "pass": 0, "inconclusive": 1, "hold": 2, "rollback": 3}


def _finite_or_none(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number or None, got {value!r}")


@attrs.frozen
class SignalResult:
    """What one signal concluded.

    ``status``: pass, inconclusive (large but not significant), hold, rollback
    or not_evaluated (the evidence is absent on both sides: nothing to judge). ``reason``: a short code
    (``within_policy``, ``regression``, ``inconclusive``, ``insufficient_data``,
    ``missing_evidence``, ``mismatch``, ``drift``, ``error_increase``,
    ``not_recorded``).
    ``baseline``/``candidate``/``delta``/``threshold``: the compared figures in
    ``unit``. ``ci``: (low, high) of ``delta`` at ``confidence`` for
    statistical signals. ``evidence``: counts (pairs used, missing, ...).
    ``next_action``: what a person should do when the status is not pass.
    ``details``: JSON-ready extras (request ids to diff, segments, scopes).
    """

    status: str = attrs.field(validator=attrs.validators.in_(STATUSES))
    reason: str = attrs.field(validator=attrs.validators.instance_of(str))
    message: str = attrs.field(validator=attrs.validators.instance_of(str))
    next_action: str | None = None
    baseline: float | None = attrs.field(default=None, validator=_finite_or_none)
    candidate: float | None = attrs.field(default=None, validator=_finite_or_none)
    delta: float | None = attrs.field(default=None, validator=_finite_or_none)
    threshold: float | None = attrs.field(default=None, validator=_finite_or_none)
    unit: str | None = None
    ci: tuple[float, float] | None = None
    confidence: float | None = attrs.field(default=None, validator=_finite_or_none)
    evidence: Mapping[str, int] = attrs.field(factory=dict)
    details: Mapping[str, Any] = attrs.field(factory=dict)


__all__ = ["RANK", "STATUSES", "GateSignal", "SignalResult"]
