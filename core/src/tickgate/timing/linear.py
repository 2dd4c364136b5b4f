"""The built-in ``linear`` timing model.

One engine step costs::

    step_ms = fixed_ms
            + per_prefill_token_ms * prefill tokens scheduled in the step
            + per_decode_seq_ms    * sequences decoding in the step
            + per_context_token_ms * context tokens those sequences read

and, optionally, ``frontend_ms`` per request (not per step): a server's time outside its steps,
added to every request's TTFT and end-to-end latency (as the roofline's ``frontend_ms``).

It turns step counts into milliseconds (TTFT, inter-token latency, end-to-end
latency, throughput) and maps arrivals given in milliseconds onto steps: a
request with ``arrival_ms`` joins the queue before the first step that starts
at or after that time; when the engine is idle the clock jumps to the next
arrival. See docs/timing.md.

It is a timing-model plugin like any other (:class:`tickgate.interfaces.TimingModel`,
registered by ``tickgate.seed.builtin_scheduler``); schedulers that fast-forward runs of
identical decode-only steps (the seed scheduler, the vLLM mirror) price such a
run with the base's :meth:`~tickgate.interfaces.TimingModel.decode_span`, fed by
this model's closed-form :meth:`LinearTiming.decode_durations`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import repeat
from operator import add, mul
from typing import Any, ClassVar

import attrs

from ..interfaces import SPAN_CHUNK, TimingModel

__all__ = ["COEFFICIENTS", "SPAN_CHUNK", "LinearTiming"]

#: the linear model's options, in ``step_ms``'s order, with what each prices
COEFFICIENTS = {
    "fixed_ms": "every step",
    "per_prefill_token_ms": "per prompt token scheduled in the step",
    "per_decode_seq_ms": "per sequence decoding in the step",
    "per_context_token_ms": "per context token those sequences read (attention over the KV cache)",
}


@attrs.frozen
class LinearTiming(TimingModel):
    name = "linear"
    description = "step_ms = fixed + per prefill token + per decoding sequence + per context token read"
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **{
                key: {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1e6,
                    "default": 0,
                    "description": f"ms {what}",
                }
                for key, what in COEFFICIENTS.items()
            },
            "frontend_ms": {
                "type": "number",
                "minimum": 0,
                "maximum": 1e6,
                "default": 0,
                "description": "ms a request spends outside the engine's steps (HTTP, tokenization, "
                "streaming): added to its TTFT and end-to-end latency",
            },
        },
    }

    fixed_ms: float = 0.0
    per_prefill_token_ms: float = 0.0
    per_decode_seq_ms: float = 0.0
    per_context_token_ms: float = 0.0
    #: per request, not per step (the roofline's ``frontend_ms`` too): a server's fixed time to first token
    frontend_ms: float = 0.0

    @classmethod
    def build(cls, options: Mapping[str, Any]) -> LinearTiming:
        return cls(**{k: float(v) for k, v in options.items()})

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return (
            self.fixed_ms
            + self.per_prefill_token_ms * prefill_tokens
            + self.per_decode_seq_ms * decode_seqs
            + self.per_context_token_ms * context_tokens
        )

    def decode_durations(self, seqs: int, context: int, k: int) -> Iterator[float]:
        """The base's durations, computed in C: ``step_ms(0, seqs, c)`` is exactly
        ``base + per_context_token_ms * c`` with ``base`` evaluated in ``step_ms``'s
        order. A subclass that overrides ``step_ms`` gets the base's per-step calls."""
        if type(self).step_ms is not LinearTiming.step_ms:
            return super().decode_durations(seqs, context, k)
        contexts: Any = range(context, context + k * seqs, seqs) if seqs else repeat(context, k)
        # step_ms(0, seqs, c) in its own order: the first three terms do not change
        base = self.fixed_ms + self.per_prefill_token_ms * 0 + self.per_decode_seq_ms * seqs
        return map(add, repeat(base), map(mul, repeat(self.per_context_token_ms), contexts))

    def to_json(self) -> dict[str, Any]:
        """``{"name": "linear", "options": ...}`` with all four coefficients, those
        the policy left out at their default of 0 (the report's ``inputs.timing``), and
        ``frontend_ms`` when it is set (reports of policies without it stay as they were)."""
        options = attrs.asdict(self)
        if not options["frontend_ms"]:
            del options["frontend_ms"]
        return {"name": self.name, "options": options}
