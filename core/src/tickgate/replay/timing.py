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

Schedulers that fast-forward runs of identical decode-only steps (the seed
scheduler, the vLLM mirror) price such a run with :meth:`TimingModel.decode_span`
instead of summing ``step_ms`` themselves, so the arithmetic that keeps a span's
times equal to single steps' lives in one place, next to the formula.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import partial, reduce
from itertools import accumulate, repeat
from operator import add, mul
from typing import Any, Iterator, Mapping

import attrs

#: longest run of step end times :meth:`TimingModel.decode_span` holds at once
SPAN_CHUNK = 1 << 16


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

    def decode_span(self, start_ms: float, seqs: int, context: int, steps: int,
                    until_ms: float | None = None) -> tuple[int, float]:
        """Price a run of up to ``steps`` identical decode-only steps in one call.

        Step k (0-based) decodes ``seqs`` sequences that read ``context + k * seqs``
        context tokens (each sequence's context grows by its new token) and costs
        ``step_ms(0, seqs, context + k * seqs)``; it starts when step k - 1 ends,
        step 0 at ``start_ms``. With ``until_ms`` (the next arrival) the run stops
        before the first step that would start at or after it.

        Returns ``(n, end_ms)``: how many steps run (``steps``, or fewer under
        ``until_ms``; 0 when ``start_ms >= until_ms``) and when the last of them
        ends (``start_ms`` for none). ``end_ms`` is bit-identical to adding each
        step's ``step_ms`` to the clock one at a time, left to right, so a
        fast-forwarded span lands on the float single steps would (the output
        digests of tests/test_output_identity.py and the vLLM conformance tests
        depend on it). ``step_ms`` must not be negative (a step never moves the
        clock back): the steps that fit are found by bisection.

        The stock model's sum runs in C: ``step_ms(0, seqs, c)`` is exactly
        ``base + per_context_token_ms * c`` with ``base`` evaluated in
        ``step_ms``'s order, and ``reduce``/``accumulate`` add left to right. A
        subclass that overrides ``step_ms`` is called once per step; one that
        can do better may override this method, keeping its contract.
        """
        if steps <= 0:
            return 0, start_ms
        if until_ms is None:
            return steps, reduce(add, self._decode_durations(seqs, context, steps), start_ms)
        t = start_ms
        if t >= until_ms:
            return 0, t
        # Durations never shrink (the context only grows), so the first one bounds
        # how many steps can start before ``until_ms``; +2 absorbs rounding, and
        # the chunks grow in case the estimate still falls short.
        first = next(self._decode_durations(seqs, context, 1))
        chunk = steps
        if first > 0:
            chunk = max(2, min(steps, int((until_ms - start_ms) / first) + 2))
        n = 0
        while n < steps:
            k = min(chunk, steps - n, SPAN_CHUNK)
            starts = list(accumulate(self._decode_durations(seqs, context + n * seqs, k), initial=t))
            # starts[j] is when step n + j starts (starts[k]: when the chunk ends);
            # starts[0] = t is before until_ms
            j = bisect_left(starts, until_ms, 1, k)
            if j < k:
                return n + j, starts[j]
            n += k
            t = starts[k]
            if t >= until_ms:
                break
            chunk *= 4
        return n, t

    def _decode_durations(self, seqs: int, context: int, k: int) -> Iterator[float]:
        """The durations of k decode steps of ``seqs`` sequences from ``context``
        context tokens on, each exactly as :meth:`step_ms` gives it."""
        contexts: Any = range(context, context + k * seqs, seqs) if seqs else repeat(context, k)
        if type(self).step_ms is TimingModel.step_ms:
            # step_ms(0, seqs, c) in its own order: the first three terms do not change
            base = self.fixed_ms + self.per_prefill_token_ms * 0 + self.per_decode_seq_ms * seqs
            return map(add, repeat(base), map(mul, repeat(self.per_context_token_ms), contexts))
        return map(partial(self.step_ms, 0, seqs), contexts)

    def to_json(self) -> dict[str, float]:
        return attrs.asdict(self)

