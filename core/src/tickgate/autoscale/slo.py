"""``slo``: size each pool for the traffic to come from the timing model's capacity at the SLOs.

What NVIDIA Dynamo's SLA planner does in its throughput-based (predictive) mode
(docs.nvidia.com/dynamo, "Planner Guide", scaling mode ``sla``): every
adjustment interval it predicts the next interval's load (request rate and token
mix) and divides it by what one engine serves while meeting the TTFT and ITL
targets, for the prefill and the decode pool separately. Dynamo reads that
capacity from a pre-deployment profile; here it comes from the pool's own timing
model, the one the replay runs on:

- **decode / mixed**: the largest batch ``B`` (at most the scheduler's
  ``max_num_seqs`` / ``max_running_requests`` / ``max_batch_size``, and what the KV cache
  holds) whose step stays
  within the ITL target, a mixed pool's step also carrying its share of prompt tokens
  (``B x prompt / output`` per step); one replica then serves
  ``B / (output x step)`` requests per second;
- **prefill**: steps of ``max_num_batched_tokens`` prompt tokens: ``tokens / prompt``
  requests per step;
- each divided into the predicted rate with a ``headroom`` (default 0.8 of the
  capacity: queueing keeps the TTFT tail within target).

The rate comes from the signals' window, raised by ``rate_sigmas`` (1) standard deviations of its
Poisson count (a window of ``n`` arrivals: ``sqrt(n) / window``), so that a quiet minute in busy
traffic does not shrink the pool (``predictor: constant``, Dynamo's constant predictor) or that plus its rising trend over ``trend_window_s``
carried ``startup`` ahead (``predictor: linear``): a replica asked for now serves
only after provisioning, load and warm-up, so a ramp must be met early. Damping
and hysteresis, as SLA planners have them: growth is immediate; a pool shrinks
only when every recommendation over ``scale_down_delay_s`` was lower, and then by
at most ``max_scale_down`` replicas per decision.

Simplified: KV capacity does not bound ``B`` (the batch cap does); the TTFT target
is met through the headroom, not a queueing model.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar

from ..interfaces.autoscaling import Autoscaler, AutoscalerContext, PoolSignals, ScaleDecision

__all__ = ["Slo"]

#: the scheduler options that cap a running batch, per engine mirror, and a step's prompt tokens
BATCH_CAPS = ("max_num_seqs", "max_running_requests", "max_batch_size", "max_running")
TOKEN_CAPS = ("max_num_batched_tokens", "chunked_prefill_size", "max_num_tokens")
#: the weight of each decision's window in the smoothed token mix
MIX_WEIGHT = 0.2


class Slo(Autoscaler):
    name = "slo"
    description = (
        "Dynamo-style SLA planner: predicted rate / one replica's capacity within the TTFT and ITL targets"
    )
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["itl_ms"],
        "properties": {
            "itl_ms": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "ITL target a step must stay within",
            },
            "ttft_ms": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "TTFT target (a prefill pool's step must stay within it)",
            },
            "headroom": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.8},
            "predictor": {"enum": ["constant", "linear"], "default": "linear"},
            "trend_window_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400, "default": 300},
            "scale_down_delay_s": {"type": "number", "minimum": 0, "maximum": 86400, "default": 300},
            "max_scale_down": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 1},
            "rate_sigmas": {
                "type": "number",
                "minimum": 0,
                "maximum": 5,
                "default": 1,
                "description": "standard deviations of the window's Poisson count added to its rate",
            },
            "hysteresis": {
                "type": "number",
                "minimum": 0,
                "maximum": 0.9,
                "default": 0.1,
                "description": "a pool shrinks only to a count whose load stays this far (a fraction) under the headroom",
            },
        },
    }

    def __init__(self, options: Mapping[str, Any], ctx: AutoscalerContext) -> None:
        self.ctx = ctx
        self.itl_ms = float(options["itl_ms"])
        self.ttft_ms = float(options.get("ttft_ms", math.inf))
        self.headroom = float(options.get("headroom", 0.8))
        self.predictor = options.get("predictor", "linear")
        self.trend_ms = 1000.0 * float(options.get("trend_window_s", 300))
        self.down_delay_ms = 1000.0 * float(options.get("scale_down_delay_s", 300))
        self.max_down = int(options.get("max_scale_down", 1))
        self.hysteresis = float(options.get("hysteresis", 0.1))
        self.sigmas = float(options.get("rate_sigmas", 1.0))
        sched = ctx.scheduler_options
        self.batch_cap = next((int(sched[k]) for k in BATCH_CAPS if isinstance(sched.get(k), int)), 256)
        self.token_cap = next((int(sched[k]) for k in TOKEN_CAPS if isinstance(sched.get(k), int)), 8192)
        self.rates: deque[tuple[float, float]] = deque()
        self.recommendations: deque[tuple[float, int]] = deque()
        self.mix: tuple[float, float] | None = None

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AutoscalerContext) -> Slo:
        return cls(options, ctx)

    def decide(self, signals: PoolSignals) -> ScaleDecision:
        now, current = signals.now_ms, signals.current
        rate = self._predicted(now, signals.arrival_rate)
        if signals.arrivals:  # the window's count is Poisson: size for its upper bound, not its mean
            span_s = min(signals.window_ms, now) / 1000.0
            rate += self.sigmas * math.sqrt(signals.arrivals) / span_s
        if signals.arrivals == 0:
            if now < signals.window_ms:  # nothing seen yet, not nothing to serve: wait for a full window
                self.recommendations.append((now, current))  # and hold the size through the scale-down delay
                return ScaleDecision(
                    current, "no arrivals yet in the first window: unchanged", "arrival_rate", 0.0
                )
            wanted = self.ctx.min_replicas
            capacity = 0.0
            why = "no arrivals in the window"
        else:
            prompt, output = self._mix(signals.mean_prompt_tokens, max(signals.mean_output_tokens, 1.0))
            capacity = self.capacity(prompt, output)
            wanted = (
                max(1, math.ceil(rate / (capacity * self.headroom)))
                if capacity > 0
                else self.ctx.max_replicas
            )
            why = f"{rate:.4g} req/s predicted, {capacity:.4g} req/s per replica within the targets"
        recs = self.recommendations
        recs.append((now, wanted))
        while recs and recs[0][0] <= now - self.down_delay_ms:
            recs.popleft()
        if wanted < current:
            # hysteresis: shrink only to a count that stays below the headroom by a margin, and
            # that every decision of the scale-down delay allowed
            margin = (
                math.ceil(rate / (capacity * self.headroom * (1.0 - self.hysteresis)))
                if capacity > 0
                else current
            )
            held = max(r for _, r in recs)
            wanted = max(held, margin, current - self.max_down)
            if wanted >= current:
                return ScaleDecision(
                    current, why + ": lower for less than the scale-down delay", "arrival_rate", rate
                )
        return ScaleDecision(wanted, why, "arrival_rate", rate)

    def _mix(self, prompt: float, output: float) -> tuple[float, float]:
        """The token mix the capacity is priced at: the windows' means, smoothed over decisions
        (``MIX_WEIGHT`` each) so that one window of long requests does not swing the count."""
        if self.mix is None:
            self.mix = (prompt, output)
        else:
            w = MIX_WEIGHT
            self.mix = ((1 - w) * self.mix[0] + w * prompt, (1 - w) * self.mix[1] + w * output)
        return self.mix

    def _predicted(self, now: float, rate: float) -> float:
        """The window's rate, plus (``linear``) its rising trend carried over the start-up time."""
        if now < self.ctx.window_ms:
            return rate  # the window is not full yet: its rate has no trend to read
        rates = self.rates
        rates.append((now, rate))
        while rates and rates[0][0] < now - self.trend_ms:
            rates.popleft()
        if self.predictor == "constant" or len(rates) < 2:
            return rate
        n = len(rates)
        mt = sum(t for t, _ in rates) / n
        mr = sum(r for _, r in rates) / n
        var = sum((t - mt) ** 2 for t, _ in rates)
        slope = sum((t - mt) * (r - mr) for t, r in rates) / var if var else 0.0  # per ms
        # the window's rate is its mean, about half a window old; a replica asked for now serves
        # after its start-up, and the next decision comes an interval later
        lead = self.ctx.window_ms / 2 + self.ctx.startup_ms + self.ctx.interval_ms
        return rate + max(0.0, slope) * lead

    def capacity(self, prompt: float, output: float) -> float:
        """Requests per second one replica serves within the targets (0: none fits)."""
        timing = self.ctx.timing
        if self.ctx.role == "prefill":
            chunk_ms = float(timing.step_ms(self.token_cap, 0, 0))
            if chunk_ms > self.ttft_ms:
                return 0.0
            return self.ctx.ranks * (self.token_cap / prompt) / (chunk_ms / 1000.0)

        def step(b: int) -> float:
            prefill = 0 if self.ctx.role == "decode" else min(int(b * prompt / output), self.token_cap)
            return float(timing.step_ms(prefill, b, int(b * (prompt + output / 2))))

        cap = self.batch_cap
        kv = self.ctx.kv_tokens_per_rank
        if kv:  # each running sequence may come to hold its whole prompt and output
            cap = min(cap, int(kv // (prompt + output)))
        lo, hi = 0, cap  # the largest batch whose step is within the ITL target
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if step(mid) <= self.itl_ms:
                lo = mid
            else:
                hi = mid - 1
        if lo == 0:
            return 0.0
        return self.ctx.ranks * lo / (output * step(lo) / 1000.0)
