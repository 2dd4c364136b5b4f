"""The one quantile function (``tickgate.util.quantile``): its convention, that
the three copies it replaced give the same bits through it, and that its
weighted form is the expanded multiset's quantile, bit for bit (hypothesis)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.util.quantile import (cumulative_weights, interpolate, quantile, weighted_interpolate,
                               weighted_quantile)
from tickgate.replay.report import distribution
from tickgate.replay.token_gaps import weighted_distribution


def test_quantile_interpolates_between_closest_ranks():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([10.0], 0.95) == 10.0
    assert quantile(list(map(float, range(101))), 0.95) == 95.0
    assert quantile([0.0, 10.0], 0.95) == pytest.approx(9.5)
    assert quantile([3, 5], 0.0) == 3 and quantile([3, 5], 1.0) == 5
    with pytest.raises(ValueError):
        quantile([], 0.5)


# The three functions as they were before they became one (report.percentile took q in 0..100).
def _report_percentile(sorted_values, q):
    n = len(sorted_values)
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _gate_quantile(sorted_values, q):
    n = len(sorted_values)
    pos = (n - 1) * q
    lo = int(pos)
    hi = lo + 1 if lo + 1 < n else lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _readers_percentile(sorted_values, q):
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def test_the_copies_it_replaced_give_the_same_bits():
    rng = random.Random(19)
    for n in [*range(1, 60), 101, 999, 1000, 4001]:
        values = sorted(rng.lognormvariate(3, 1) for _ in range(n))
        ints = sorted(rng.randrange(1000) for _ in range(n))
        for data in (values, ints):
            for q in (0.0, 0.05, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0):
                got = quantile(data, q)
                assert got == _gate_quantile(data, q) == _readers_percentile(data, q)
                assert type(got) is type(_gate_quantile(data, q))
            last = len(data) - 1
            for p in (50, 90, 95, 99):
                assert interpolate(data, last * p / 100.0) == _report_percentile(data, p)


def test_the_report_keeps_its_percent_index():
    # (n - 1) * 95 / 100 and (n - 1) * 0.95 differ in the last bit for n = 8: the
    # report's figures come from the first
    data = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 2.0 ** 60]
    assert 7 * 95 / 100.0 != 7 * 0.95
    want = _report_percentile(data, 95)
    assert want != quantile(data, 0.95)
    assert distribution(data, digits=30)["p95"] == round(want, 30)


# -- weighted values: the expanded multiset's quantile without expanding it ---------------------------

_values = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, width=64)


@st.composite
def _weighted(draw: Any) -> tuple[list[float], list[int]]:
    """Sorted values (repeats allowed: equal values in separate groups) with weights 0..6, not all 0."""
    some = st.one_of(_values, st.sampled_from([0.0, 1.0, 2.5]))
    values = sorted(draw(st.lists(some, min_size=1, max_size=12)))
    weights = draw(st.lists(st.integers(0, 6), min_size=len(values), max_size=len(values)))
    if not any(weights):
        weights[draw(st.integers(0, len(values) - 1))] = draw(st.integers(1, 6))
    return values, weights


def _expand(values: list[float], weights: list[int]) -> list[float]:
    return [v for v, w in zip(values, weights) for _ in range(w)]


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(_weighted(), st.sampled_from([0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]))
def test_weighted_quantile_is_the_expanded_lists_bit_for_bit(data: Any, q: float) -> None:
    values, weights = data
    assert weighted_quantile(values, weights, q) == quantile(_expand(values, weights), q)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(_weighted(), st.floats(min_value=0.0, max_value=1.0))
def test_weighted_interpolate_is_interpolate_of_the_expanded_list(data: Any, fraction: float) -> None:
    values, weights = data
    expanded = _expand(values, weights)
    index = (len(expanded) - 1) * fraction
    assert weighted_interpolate(values, cumulative_weights(weights), index) == interpolate(expanded, index)


@settings(max_examples=800, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), st.integers(0, 5)),
                min_size=1, max_size=15))
def test_weighted_distribution_is_the_reports_distribution_of_the_expanded_list(pairs: Any) -> None:
    """The report's figure over weighted values (latency.itl_ms): every percentile and the max the
    same float as distribution() over the expanded values; the mean (a sum in another order) to
    the last digit but one."""
    grouped: dict[float, int] = {}
    for value, weight in pairs:
        grouped[value] = grouped.get(value, 0) + weight
    expanded = [v for v, w in grouped.items() for _ in range(w)]
    got, want = weighted_distribution(grouped, 30), distribution(expanded, 30)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert got["mean"] == pytest.approx(want.pop("mean"), rel=1e-12, abs=1e-12)
    del got["mean"]
    assert got == want


def test_weighted_quantile_on_a_small_example() -> None:
    # [1, 1, 1, 5]: p50 at index 1.5 -> 1.0; p90 at 2.7 -> 1 + 4 * 0.7
    assert weighted_quantile([1.0, 5.0], [3, 1], 0.5) == 1.0
    assert weighted_quantile([1.0, 5.0], [3, 1], 0.9) == quantile([1.0, 1.0, 1.0, 5.0], 0.9)
    assert weighted_quantile([1.0, 2.0, 5.0], [2, 0, 2], 0.5) == 3.0  # a weight of 0 is not there
    for bad in (([], [], 0.5), ([1.0], [0], 0.5)):
        with pytest.raises(ValueError):
            weighted_quantile(*bad)
    with pytest.raises(ValueError):
        weighted_interpolate([1.0, 2.0], [1], 0.0)
