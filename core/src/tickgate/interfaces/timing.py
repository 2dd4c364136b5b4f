"""The base of timing models (kind ``timing_model``; docs/timing.md): what turns an
engine step into milliseconds. Re-exported by :mod:`tickgate.interfaces` with the
other plugin bases; it has a module of its own because it is the one base with
behaviour of its own (pricing spans of decode steps in closed form)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from functools import partial, reduce
from itertools import accumulate, repeat
from operator import add
from typing import Any

from .plugin import Plugin

__all__ = ["SPAN_CHUNK", "TimingModel"]


#: longest run of step end times :meth:`TimingModel.decode_span` holds at once
SPAN_CHUNK = 1 << 16


class TimingModel(Plugin):
    """Turns what an engine step does into its duration in ms (kind ``timing_model``).

    Selected by a policy's ``timing`` section (``{name: ..., options: {...}}``;
    docs/timing.md) and built once per policy by :meth:`build` from its
    validated ``options``. A model is a pure function of its options: the one
    instance prices every step of a replay (``BuildContext.timing``,
    ``AdmissionContext.timing``) and never changes a scheduling decision.

    A model implements :meth:`step_ms`; :meth:`decode_span` and
    :meth:`decode_durations` have defaults built on it. Richer descriptions of
    a step (the context each prefill attends over, per-sequence context
    lengths, the parallel layout) are to arrive as further methods with
    defaults here, so a model written against this interface keeps working.
    """

    #: ms a request spends outside the engine's steps, on its way in and out (HTTP,
    #: tokenization, IPC, streaming the tokens back): added to TTFT and end-to-end
    #: latency as a client measures them, never to a step (scheduling is unchanged)
    frontend_ms: float = 0.0
    #: the validated options :meth:`build` keeps (a model that overrides it may keep none)
    options: dict[str, Any]

    def frontend_service_ms(self, prompt_tokens: int, output_tokens: int) -> float:
        """The serial work one request costs the server's front end (an API server
        process: setting the request up, streaming its tokens back). A front end
        busy with earlier requests delays a request's entry into the engine
        (docs/timing.md, "The front end"); this base costs nothing, so requests
        enter when they arrive."""
        return 0.0

    @property
    def serial_frontend(self) -> bool:
        """Whether requests queue for the front end (:meth:`frontend_service_ms` is overridden)."""
        return type(self).frontend_service_ms is not TimingModel.frontend_service_ms

    @classmethod
    def build(cls, options: Mapping[str, Any]) -> TimingModel:
        """A model from its validated ``options`` (this base keeps them as ``self.options``).
        Raise :class:`tickgate.util.errors.ConfigError` for options that cannot work."""
        model = cls()
        model.options = dict(options)
        return model

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        """The duration of one step that schedules ``prefill_tokens`` prompt tokens
        and decodes ``decode_seqs`` sequences, which read ``context_tokens`` context
        tokens (attention over the KV cache). Never negative, and never smaller for
        more context (:meth:`decode_span` relies on it)."""
        raise NotImplementedError

    def price_step(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        context_tokens: int,
        prefill_seqs: int,
        prefill_pairs: float,
        prefill_context: int,
    ) -> float:
        """:meth:`step_ms` with the shape of the step's prefill, which schedulers
        that know it call instead: ``prefill_seqs`` chunks of prompt are computed,
        attending ``prefill_pairs`` (query, key) pairs in all (a causal chunk of c
        tokens after p computed ones attends ``c * p + c * (c + 1) / 2``) and
        reading ``prefill_context`` tokens of earlier KV (the sum of the p). A
        decode-only step (``prefill_tokens == 0``) must cost exactly
        ``step_ms(0, decode_seqs, context_tokens)``. This default ignores the
        shape, so a model that only implements :meth:`step_ms` keeps working.

        ``context_tokens`` here is the decoding sequences' context only. A
        scheduler calls this method for steps with prompt chunks when the model
        overrides it (:attr:`prices_shape`), and :meth:`step_ms` otherwise, with
        the context it always passed: models that price by ``step_ms`` alone see
        exactly the calls they saw before this method existed."""
        return self.step_ms(prefill_tokens, decode_seqs, context_tokens)

    @property
    def prices_shape(self) -> bool:
        """Whether this model overrides :meth:`price_step` (schedulers then describe
        the shape of a step's prefill chunks to it)."""
        return type(self).price_step is not TimingModel.price_step

    def decode_span(
        self, start_ms: float, seqs: int, context: int, steps: int, until_ms: float | None = None
    ) -> tuple[int, float]:
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

        The durations come from :meth:`decode_durations` and are summed in C
        (``reduce``/``accumulate`` add left to right). A model that can do better
        may override this method, keeping its contract
        (``TimingModelContract`` checks it against single steps).
        """
        if steps <= 0:
            return 0, start_ms
        if until_ms is None:
            return steps, reduce(add, self.decode_durations(seqs, context, steps), start_ms)
        t = start_ms
        if t >= until_ms:
            return 0, t
        # Durations never shrink (the context only grows), so the first one bounds
        # how many steps can start before ``until_ms``; +2 absorbs rounding, and
        # the chunks grow in case the estimate still falls short.
        first = next(self.decode_durations(seqs, context, 1))
        chunk = steps
        if first > 0:
            chunk = max(2, min(steps, int((until_ms - start_ms) / first) + 2))
        n = 0
        while n < steps:
            k = min(chunk, steps - n, SPAN_CHUNK)
            starts = list(accumulate(self.decode_durations(seqs, context + n * seqs, k), initial=t))
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

    def decode_durations(self, seqs: int, context: int, k: int) -> Iterator[float]:
        """The durations of k decode steps of ``seqs`` sequences from ``context``
        context tokens on, each exactly as :meth:`step_ms` gives it (this default
        calls it once per step; a model with a closed form may override it)."""
        contexts: Any = range(context, context + k * seqs, seqs) if seqs else repeat(context, k)
        return map(partial(self.step_ms, 0, seqs), contexts)

    def to_json(self) -> dict[str, Any]:
        """What a timed report records as ``inputs.timing``: ``{"name": ..., "options":
        ...}``, a policy ``timing`` section that builds this model again, with the
        parameters the model resolved its options to (``linear``: all four
        coefficients, defaults included). This base gives the options as the policy
        gave them; a model that fills defaults or looks values up (a GPU catalogue)
        overrides it to show what it used."""
        return {"name": self.name, "options": dict(getattr(self, "options", {}))}
