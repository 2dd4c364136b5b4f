"""``hpa``: the Kubernetes HorizontalPodAutoscaler's algorithm, on a fleet's metrics.

Followed from the Kubernetes documentation ("Horizontal Pod Autoscaling",
kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/, sections
"Algorithm details" and "Configurable scaling behavior") and the controller it
describes (``pkg/controller/podautoscaler``: ``replica_calculator.go``,
``horizontal.go``):

1. **per metric**: ``ratio = current / target``; within ``tolerance`` (0.1) of 1 the
   recommendation is the current replica count, else ``ceil(ratio x ready)``. An
   ``average`` metric (the HPA's ``AverageValue``: queue depth, running requests,
   arrival rate) is the total over the ready replicas divided by them; a ``value``
   metric (``Value``: KV usage, a TTFT or ITL percentile) is taken as it is. With
   several metrics, the largest recommendation wins. A metric without a figure (no
   request finished in the window) is left out; with none, nothing changes.
2. **stabilization**: the recommendation is held between the lowest recommendation
   of the last ``scale_up.stabilization_window_s`` (default 0) and the highest of
   the last ``scale_down.stabilization_window_s`` (default 300), as
   ``stabilizeRecommendationWithBehaviors`` does.
3. **rate policies**: at most ``scale_up`` / ``scale_down`` policies allow per
   period (defaults: up by 100 % or 4 replicas per 15 s, whichever is more; down by
   100 % per 15 s), counting the changes already made in the period
   (``calculateScaleUpLimitWithScalingRules``); ``select_policy`` ``max`` takes the
   policy allowing the most change, ``min`` the least.

Simplified: the HPA's special cases for pods whose metrics are missing or not
ready (it assumes 0 % or 100 % usage for them on CPU metrics) do not arise: the
fleet's figures cover every ready replica. "Current replicas" is the Deployment's
count (ready and starting), as the HPA reads the scale subresource.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar

from ..interfaces.autoscaling import (
    METRICS,
    TOTALS,
    Autoscaler,
    AutoscalerContext,
    PoolSignals,
    ScaleDecision,
)

__all__ = ["Hpa"]

_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "value", "period_s"],
    "properties": {
        "type": {"enum": ["percent", "pods"], "description": "percent of the replicas, or a count of them"},
        "value": {"type": "integer", "minimum": 1, "maximum": 100000},
        "period_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
    },
}


def _rules(what: str, window: float, policies: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "description": f"how fast the pool may {what} (default: {policies}; window {window:g} s)",
        "properties": {
            "stabilization_window_s": {"type": "number", "minimum": 0, "maximum": 3600},
            "policies": {"type": "array", "minItems": 1, "items": _POLICY},
            "select_policy": {"enum": ["max", "min", "disabled"]},
        },
    }


DEFAULT_UP = {
    "stabilization_window_s": 0.0,
    "policies": [
        {"type": "percent", "value": 100, "period_s": 15},
        {"type": "pods", "value": 4, "period_s": 15},
    ],
    "select_policy": "max",
}
DEFAULT_DOWN = {
    "stabilization_window_s": 300.0,
    "policies": [{"type": "percent", "value": 100, "period_s": 15}],
    "select_policy": "max",
}


class Hpa(Autoscaler):
    name = "hpa"
    description = (
        "Kubernetes HPA: ceil(replicas x metric / target), tolerance, stabilization windows, rate policies"
    )
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["metrics"],
        "properties": {
            "metrics": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name", "target"],
                    "properties": {
                        "name": {
                            "enum": list(METRICS),
                            "description": "a fleet metric (docs/autoscaling.md)",
                        },
                        "target": {"type": "number", "exclusiveMinimum": 0},
                        "type": {
                            "enum": ["average", "value"],
                            "description": "average: the total per ready replica (HPA AverageValue; the "
                            "default for waiting, running, in_flight, arrival_rate); value: as it is",
                        },
                    },
                },
            },
            "tolerance": {"type": "number", "minimum": 0, "maximum": 10, "default": 0.1},
            "scale_up": _rules("grow", 0, "100 % or 4 replicas per 15 s, the larger"),
            "scale_down": _rules("shrink", 300, "100 % per 15 s"),
        },
    }

    def __init__(self, options: Mapping[str, Any], ctx: AutoscalerContext) -> None:
        self.metrics = [
            (m["name"], float(m["target"]), m.get("type", "average" if m["name"] in TOTALS else "value"))
            for m in options["metrics"]
        ]
        self.tolerance = float(options.get("tolerance", 0.1))
        self.up = {**DEFAULT_UP, **options.get("scale_up", {})}
        self.down = {**DEFAULT_DOWN, **options.get("scale_down", {})}
        self.min, self.max = ctx.min_replicas, ctx.max_replicas
        #: (ms, recommendation) of past decisions, and (ms, replicas changed) of past scalings
        self.recommendations: deque[tuple[float, int]] = deque()
        self.up_events: deque[tuple[float, int]] = deque()
        self.down_events: deque[tuple[float, int]] = deque()

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AutoscalerContext) -> Hpa:
        return cls(options, ctx)

    def decide(self, signals: PoolSignals) -> ScaleDecision:
        now, current, ready = signals.now_ms, signals.current, max(signals.ready, 1)
        best: tuple[int, str, float] | None = None
        for name, target, kind in self.metrics:
            value = signals.metric(name)
            if value is None:
                continue
            usage = value / ready if kind == "average" else value
            ratio = usage / target
            proposal = current if abs(ratio - 1.0) <= self.tolerance else math.ceil(ratio * ready)
            if best is None or proposal > best[0]:
                best = (proposal, name, usage)
        if best is None:
            return ScaleDecision(current, "no metric has a figure in the window: unchanged")
        desired, metric, usage = best
        stable = self._stabilized(now, current, desired)
        limited, why = self._rate_limited(now, current, stable)
        limited = min(max(limited, self.min), self.max)
        if limited > current:
            self.up_events.append((now, limited - current))
        elif limited < current:
            self.down_events.append((now, current - limited))
        reason = f"{metric} {usage:.4g} against target {self._target(metric):.4g}: {desired} recommended"
        if stable != desired:
            reason += f", {stable} after the stabilization window"
        if why:
            reason += f", {limited} {why}"
        return ScaleDecision(limited, reason, metric, usage)

    def _target(self, metric: str) -> float:
        return next(t for n, t, _ in self.metrics if n == metric)

    def _stabilized(self, now: float, current: int, desired: int) -> int:
        up_cut = now - 1000.0 * float(self.up["stabilization_window_s"])
        down_cut = now - 1000.0 * float(self.down["stabilization_window_s"])
        keep = min(up_cut, down_cut)
        recs = self.recommendations
        while recs and recs[0][0] <= keep:
            recs.popleft()
        up_rec = down_rec = desired
        for at, rec in recs:
            if at > up_cut:
                up_rec = min(up_rec, rec)
            if at > down_cut:
                down_rec = max(down_rec, rec)
        recs.append((now, desired))
        out = current
        if out < up_rec:
            out = up_rec
        if out > down_rec:
            out = down_rec
        return out

    def _rate_limited(self, now: float, current: int, desired: int) -> tuple[int, str]:
        if desired > current:
            limit = self._limit(now, current, self.up, self.up_events, up=True)
            if desired > limit:
                return max(limit, current), "by the scale-up policies"
        elif desired < current:
            limit = self._limit(now, current, self.down, self.down_events, up=False)
            if desired < limit:
                return min(limit, current), "by the scale-down policies"
        return desired, ""

    @staticmethod
    def _limit(
        now: float, current: int, rules: Mapping[str, Any], events: deque[tuple[float, int]], up: bool
    ) -> int:
        select = rules.get("select_policy", "max")
        if select == "disabled":
            return current
        longest = max(float(p["period_s"]) for p in rules["policies"])
        while events and events[0][0] <= now - 1000.0 * longest:
            events.popleft()
        # "max" picks the policy allowing the most change: the highest limit up, the lowest down
        pick = max if (select == "max") == up else min
        result: int | None = None
        for policy in rules["policies"]:
            since = now - 1000.0 * float(policy["period_s"])
            changed = sum(n for at, n in events if at > since)
            start = current - changed if up else current + changed
            value = int(policy["value"])
            if policy["type"] == "pods":
                proposed = start + value if up else start - value
            elif up:
                proposed = math.ceil(start * (1 + value / 100.0))
            else:
                proposed = int(start * (1 - value / 100.0))
            result = proposed if result is None else pick(result, proposed)
        assert result is not None  # the schema asks for one policy or more
        return result
