"""``TimingModel.decode_span`` (the base every timing model inherits): a run of identical decode steps priced in one
call lands on exactly the float, and holds exactly the steps, that adding
``step_ms`` one step at a time would (the seed scheduler and the vLLM mirror
fast-forward with it)."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.interfaces import TimingModel
from tickgate.timing.linear import SPAN_CHUNK, LinearTiming


def step_by_step(model: TimingModel, start: float, seqs: int, context: int, steps: int,
                 until: float | None) -> tuple[int, float]:
    """The engine's way: a step runs only if it starts before ``until``."""
    now, n = start, 0
    while n < steps and (until is None or now < until):
        now = now + model.step_ms(0, seqs, context + n * seqs)
        n += 1
    return n, now


@attrs.frozen
class Quadratic(LinearTiming):
    """A model of its own (``step_ms`` overridden): called once per step."""

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.fixed_ms + 1e-9 * context_tokens * context_tokens / max(1, decode_seqs)


coefficient = st.one_of(st.just(0.0), st.floats(1e-6, 50.0))
models = st.builds(LinearTiming, coefficient, coefficient, coefficient, st.floats(0.0, 0.01))


@settings(max_examples=300, deadline=None)
@given(models, st.booleans(), st.floats(0.0, 1e7), st.integers(0, 64), st.integers(0, 10**6),
       st.integers(0, 3000), st.one_of(st.none(), st.floats(0.0, 5e4)))
def test_a_span_is_bit_identical_to_single_steps(model, custom, start, seqs, context, steps, after):
    if custom:
        model = Quadratic(model.fixed_ms)
    until = None if after is None else start + after
    assert model.decode_span(start, seqs, context, steps, until) == step_by_step(
        model, start, seqs, context, steps, until)


@settings(max_examples=200, deadline=None)
@given(models, st.floats(0.0, 1e6), st.integers(1, 16), st.integers(0, 10**5), st.integers(1, 400),
       st.integers(0, 400))
def test_an_arrival_exactly_at_a_step_start_waits_for_it(model, start, seqs, context, steps, at):
    # the arrival joins before the step that starts at its time: that step is not in the span
    until = step_by_step(model, start, seqs, context, min(at, steps), None)[1]
    assert model.decode_span(start, seqs, context, steps, until) == step_by_step(
        model, start, seqs, context, steps, until)


def test_long_spans_and_an_arrival_far_ahead():
    model = LinearTiming(6.0, 0.02, 0.1, 0.0002)
    steps = 3 * SPAN_CHUNK + 5  # several chunks
    assert model.decode_span(12.5, 7, 900, steps) == step_by_step(model, 12.5, 7, 900, steps, None)
    for until in (12.5, 12.6, 20.0, 1e4, 1e6, 1e9):
        assert model.decode_span(12.5, 7, 900, steps, until) == step_by_step(model, 12.5, 7, 900, steps, until)
    assert model.decode_span(3.0, 2, 10, 0, 100.0) == (0, 3.0)
    # a model that costs nothing: every step starts at the start
    assert LinearTiming().decode_span(5.0, 3, 0, 40, 6.0) == (40, 5.0)


class Steps(TimingModel):
    """A third-party model on the bare base: ``step_ms`` alone, the span from the base's defaults."""

    name = "steps"

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return 0.5 + 0.25 * (context_tokens // 1000) + 0.1 * decode_seqs


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1e6), st.integers(0, 16), st.integers(0, 10**5), st.integers(0, 2000),
       st.one_of(st.none(), st.floats(0.0, 2e3)))
def test_a_model_with_only_step_ms_gets_exact_spans(start, seqs, context, steps, after):
    model = Steps.build({})
    until = None if after is None else start + after
    assert model.decode_span(start, seqs, context, steps, until) == step_by_step(
        model, start, seqs, context, steps, until)
