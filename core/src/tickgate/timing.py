"""The per-step latency model.

One engine step costs::

    step_ms = fixed_ms
            + per_prefill_token_ms * prefill tokens scheduled in the step
            + per_decode_seq_ms    * sequences decoding in the step
            + per_context_token_ms * context tokens those sequences read

It turns step counts into milliseconds (TTFT, inter-token latency, end-to-end
latency, throughput) and maps arrivals given in milliseconds onto steps: a
request with ``arrival_ms`` joins the queue before the first step that starts
at or after that time; when the engine is idle the clock jumps to the next
arrival. See docs/timing.md.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs


@attrs.frozen
class TimingModel:
    fixed_ms: float = 0.0
    per_prefill_token_ms: float = 0.0
    per_decode_seq_ms: float = 0.0
    per_context_token_ms: float = 0.0

    @classmethod
    def from_policy(cls, section: Mapping[str, Any] | None) -> "TimingModel | None":
        if section is None:
            return None
        return cls(**{k: float(v) for k, v in section.items()})

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return (
            self.fixed_ms
            + self.per_prefill_token_ms * prefill_tokens
            + self.per_decode_seq_ms * decode_seqs
            + self.per_context_token_ms * context_tokens
        )

    def to_json(self) -> dict[str, float]:
        return attrs.asdict(self)
