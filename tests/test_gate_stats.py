"""Gate statistics: exact fast quantiles, the seeded paired bootstrap and the
derived minimum sample sizes."""

from __future__ import annotations

import random

import pytest

from tickgate.gate.stats import (_RankQuantile, derive_seed, min_pairs_for_quantile, min_pairs_for_rate,
                                 paired_quantile_delta, resample_indices, select_quantile)
from tickgate.util.quantile import quantile


@pytest.mark.parametrize("shape", ["lognormal", "ties", "descending"])
@pytest.mark.parametrize("q", [0.0, 0.05, 0.5, 0.95, 0.999, 1.0])
def test_select_quantile_equals_the_sorted_quantile(shape, q):
    rng = random.Random(4)
    n = 30001
    if shape == "lognormal":
        values = [rng.lognormvariate(0, 1) for _ in range(n)]
    elif shape == "ties":
        values = [float(rng.randint(0, 3)) for _ in range(n)]
    else:
        values = sorted((rng.random() for _ in range(n)), reverse=True)
    assert select_quantile(values, q) == quantile(sorted(values), q)


@pytest.mark.parametrize("m", [1, 2, 7, 300, 4000])
def test_rank_quantile_of_a_resample_equals_sorting_the_resample(m):
    rng = random.Random(m)
    values = [round(rng.lognormvariate(0, 1), 2) for _ in range(m)]
    for q in (0.05, 0.5, 0.95):
        rq = _RankQuantile(values, q)
        for _ in range(10):
            idx = resample_indices(rng, m)
            assert rq.of(idx) == quantile(sorted(values[i] for i in idx), q)


def test_resample_indices_are_seeded_and_in_range():
    a = resample_indices(random.Random(1), 1000)
    assert a == resample_indices(random.Random(1), 1000)
    assert a != resample_indices(random.Random(2), 1000)
    assert min(a) >= 0 and max(a) < 1000 and len(set(a)) > 500
    assert a[:5] == [int(x) for x in a[:5]]


def test_derived_seed_is_stable_across_processes():
    assert derive_seed(20250101, "latency-p95") == derive_seed(20250101, "latency-p95")
    assert derive_seed(0, "latency-p95") == 3_315_431_555  # crc32-based, never hash()
    assert derive_seed(0, "latency-p95") != derive_seed(0, "ttft-p95")


def test_minimum_sample_sizes():
    assert min_pairs_for_quantile(0.95, 10) == 200
    assert min_pairs_for_quantile(0.99, 10) == 1000
    assert min_pairs_for_quantile(0.5, 10) == 20
    assert min_pairs_for_rate(0.01, 0.95) == 300  # rule of three
    assert min_pairs_for_rate(0.05, 0.95) == 60
    assert min_pairs_for_rate(0.0, 0.95) == 1


def _pairs(n: int, factor: float, seed: int = 1) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    base = [rng.lognormvariate(5, 0.5) for _ in range(n)]
    return base, [b * factor * (1 + rng.gauss(0, 0.02)) for b in base]


def test_bootstrap_is_deterministic_and_brackets_the_point_estimate():
    base, cand = _pairs(2000, 1.2)
    kw = dict(q=0.95, relative=True, confidence=0.95, resamples=200, max_pairs=4000)
    a = paired_quantile_delta(base, cand, seed=7, **kw)
    assert a == paired_quantile_delta(base, cand, seed=7, **kw)
    assert a != paired_quantile_delta(base, cand, seed=8, **kw)
    assert a.ci_low < a.delta < a.ci_high
    assert 0.15 < a.ci_low and a.ci_high < 0.25
    assert a.bootstrap_pairs == 2000 and a.resamples == 200


def test_subsampled_bootstrap_rescales_its_interval_to_the_full_sample():
    base, cand = _pairs(40000, 1.0)
    full = paired_quantile_delta(base, cand, q=0.95, relative=True, confidence=0.95, resamples=100,
                                 max_pairs=40000, seed=3)
    sub = paired_quantile_delta(base, cand, q=0.95, relative=True, confidence=0.95, resamples=100,
                                max_pairs=4000, seed=3)
    assert sub.delta == full.delta  # the point estimate always uses every pair
    assert sub.bootstrap_pairs == 4000
    width_full = full.ci_high - full.ci_low
    width_sub = sub.ci_high - sub.ci_low
    assert 0.5 < width_sub / width_full < 2.0  # rescaled, not the 3x-wider subsample interval
    assert sub.ci_low < 0 < sub.ci_high


def test_identical_samples_have_a_zero_interval():
    base, _ = _pairs(500, 1.0)
    d = paired_quantile_delta(base, list(base), q=0.95, relative=True, confidence=0.95, resamples=50,
                              max_pairs=4000, seed=1)
    assert (d.delta, d.ci_low, d.ci_high) == (0.0, 0.0, 0.0)
