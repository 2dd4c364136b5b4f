"""The one quantile function (``tickgate.quantile``): its convention, and that
the three copies it replaced give the same bits through it."""

from __future__ import annotations

import math
import random

import pytest

from tickgate.quantile import interpolate, quantile
from tickgate.replay.report import distribution


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
