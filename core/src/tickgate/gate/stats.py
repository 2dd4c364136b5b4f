"""Statistics for gate signals: quantiles, a seeded paired bootstrap and the
minimum sample sizes the signals enforce.

Why a *paired* bootstrap: baseline and candidate served the same requests, so
resampling request pairs (not each side independently) keeps the per-request
correlation (a long prompt is slow on both sides) and gives a much tighter
interval for the p95 delta than two independent samples would.

Why subsampling: a bootstrap over a million pairs would sort a million values
hundreds of times. Above ``max_pairs`` pairs we draw a seeded simple random
subsample of ``m = max_pairs`` pairs, bootstrap it, and rescale the interval
to the full sample size with the m-out-of-n rule
``ci = d_full + (q_sub - d_sub) * sqrt(m / n)`` (a quantile estimator's
spread shrinks as ``1/sqrt(n)``). The point estimate always uses all pairs.
Every random draw comes from ``random.Random(seed)``; the seed is derived from
the policy seed and the signal id, so results never depend on process state.
"""

from __future__ import annotations

import math
import operator
import random
import sys
import zlib
from array import array
from collections.abc import Sequence
from itertools import compress, repeat
from typing import Any

import attrs

from ..util.quantile import quantile


def select_quantile(values: Sequence[float], q: float) -> float:
    """``quantile(sorted(values), q)`` without sorting everything.

    A strided subsample (deterministic) brackets the quantile's rank; only
    the values inside the bracket are sorted. The counts below and inside the
    bracket prove it holds the two order statistics the interpolation needs;
    when they do not (a badly placed bracket), the full sort is the fallback.
    The result is exactly the sorted-list quantile.
    """
    n = len(values)
    if n < 20000:
        return quantile(sorted(values), q)
    step = n // 4000
    probe = sorted(values[::step])
    lo_cut = quantile(probe, max(0.0, q - 0.02))
    hi_cut = quantile(probe, min(1.0, q + 0.02))
    pos = (n - 1) * q
    lo = int(pos)
    frac = pos - lo
    # compress(map(le)) rather than filter(lo_cut.__le__): the operator is a
    # plain C call, not a method wrapper (~1.5x faster on a list)
    upper = list(compress(values, map(operator.le, repeat(lo_cut), values)))
    below = n - len(upper)
    middle = list(compress(upper, map(operator.ge, repeat(hi_cut), upper)))
    if below > lo or below + len(middle) < min(lo + 2, n):
        return quantile(sorted(values), q)
    middle.sort()
    k = lo - below
    a = middle[k]
    b = middle[k + 1] if k + 1 < len(middle) else a
    return a + (b - a) * frac


def derive_seed(seed: int, label: str) -> int:
    """A per-signal seed that is stable across processes (no ``hash()``)."""
    return (seed * 1_000_003 + zlib.crc32(label.encode("utf-8"))) & 0xFFFF_FFFF_FFFF


def min_pairs_for_quantile(q: float, min_tail: int) -> int:
    """Pairs needed so that at least ``min_tail`` observations lie above the
    q-quantile on each side: ``ceil(min_tail / (1 - q))`` (p95, 10 -> 200).
    Fewer and the p95 is decided by a handful of requests and the bootstrap
    cannot resample the tail it is asked about."""
    return max(1, math.ceil(min_tail / (1.0 - q) - 1e-9))


def min_pairs_for_rate(max_rate: float, confidence: float) -> int:
    """Rule of three, generalised: with zero events in n trials the one-sided
    upper confidence bound of the rate is ``-ln(1 - confidence) / n``; a rate
    limit of ``max_rate`` can only be shown with ``n >= -ln(1-c) / max_rate``
    (1% at 95% -> 300). A limit of 0 cannot be shown by sampling: 1 pair."""
    if max_rate <= 0:
        return 1
    return max(1, math.ceil(-math.log(1.0 - confidence) / max_rate - 1e-9))


@attrs.frozen
class Delta:
    """A paired comparison of one quantile: point values and the interval."""

    baseline: float
    candidate: float
    delta: float
    ci_low: float | None
    ci_high: float | None
    resamples: int
    bootstrap_pairs: int


def _delta(b: float, c: float, relative: bool) -> float:
    if relative:
        return c / b - 1.0 if b > 0 else (0.0 if c == b else math.inf)
    return c - b


def point_delta(qb: float, qc: float, relative: bool) -> Delta:
    """A :class:`Delta` of two known quantiles, without an interval (what
    :func:`paired_quantile_delta` gives with ``resamples=0``)."""
    return Delta(qb, qc, _delta(qb, qc, relative), None, None, 0, 0)


def paired_quantile_delta(
    base: Sequence[float],
    cand: Sequence[float],
    *,
    q: float,
    relative: bool,
    confidence: float,
    resamples: int,
    max_pairs: int,
    seed: int,
    point: tuple[float, float] | None = None,
) -> Delta:
    """Point estimate of ``Q_q(cand) vs Q_q(base)`` over all pairs plus a
    seeded percentile-bootstrap interval (see module docstring). ``resamples``
    0 gives the point estimate only. ``point``: the two full-sample quantiles
    when the caller already has them (they are the costly part at a million
    pairs, and signals share them with the segment summaries)."""
    n = len(base)
    if n != len(cand) or n == 0:
        raise ValueError("need equally long, non-empty paired samples")
    qb, qc = point if point is not None else (select_quantile(base, q), select_quantile(cand, q))
    if resamples <= 0 or n < 2:
        return point_delta(qb, qc, relative)
    d_full = _delta(qb, qc, relative)
    rng = random.Random(seed)
    if n > max_pairs:
        pick = sorted(rng.sample(range(n), max_pairs))
        sb = gather_list(base, pick)
        sc = gather_list(cand, pick)
        m = max_pairs
        d_sub = _delta(select_quantile(sb, q), select_quantile(sc, q), relative)
        scale = math.sqrt(m / n)
    else:
        sb, sc, m, d_sub, scale = list(base), list(cand), n, d_full, 1.0
    qb_sub = _RankQuantile(sb, q)
    qc_sub = _RankQuantile(sc, q)
    deltas = []
    for _ in range(resamples):
        idx = resample_indices(rng, m)
        deltas.append(_delta(qb_sub.of(idx), qc_sub.of(idx), relative))
    deltas.sort()
    alpha = (1.0 - confidence) / 2.0
    lo = quantile(deltas, alpha)
    hi = quantile(deltas, 1.0 - alpha)
    return Delta(qb, qc, d_full, d_full + (lo - d_sub) * scale, d_full + (hi - d_sub) * scale, resamples, m)


def resample_indices(rng: random.Random, m: int) -> list[int]:
    """m indices drawn uniformly with replacement from range(m), generated in
    C: 64 random bits each, reduced modulo m (bias below m / 2**64)."""
    words = array("Q", rng.randbytes(8 * m))
    if sys.byteorder != "little":  # the same indices on every machine
        words.byteswap()
    return list(map(operator.mod, words, repeat(m)))


class _RankQuantile:
    """The q-quantile of a resample without sorting the resample.

    The sample is sorted once; a resample is a list of indices into it, so its
    order statistics are those of the indices' ranks. Only ranks at or above a
    floor a few standard deviations below the quantile's rank can matter; those
    few are sorted. When too few lie above the floor (astronomically rare) the
    whole resample is sorted. Either way the result equals
    ``quantile(sorted(resample), q)`` exactly.
    """

    def __init__(self, values: Sequence[float], q: float) -> None:
        m = len(values)
        order = sorted(range(m), key=values.__getitem__)
        self.sorted = [values[i] for i in order]
        self.rank = [0] * m
        for r, i in enumerate(order):
            self.rank[i] = r
        self.q = q
        spread = 5.0 * math.sqrt(m * q * (1.0 - q)) + 2.0
        self.floor = max(0, int(m * q - spread))
        # rank + 1 at or above the floor, 0 below: ``filter(None, ...)`` keeps the
        # ranks that matter without a call per index (a resample is 4000 indices,
        # and each bootstrap ranks 2 x 200 of them)
        self._high = [r + 1 if r >= self.floor else 0 for r in self.rank]
        self._by_high: list[Any] = [None, *self.sorted]  # [rank + 1] -> value

    def of(self, idx: list[int]) -> float:
        n = len(idx)
        pos = (n - 1) * self.q
        lo = int(pos)
        frac = pos - lo
        top = list(filter(None, gather_list(self._high, idx)))
        below = n - len(top)
        if below > lo:
            top, below = [r + 1 for r in gather_list(self.rank, idx)], 0
        top.sort()
        k = lo - below
        a = self._by_high[top[k]]
        b = self._by_high[top[k + 1]] if k + 1 < len(top) else a
        return a + (b - a) * frac


def gather_list(values: Sequence[Any], index: Sequence[int]) -> list[Any]:
    """``[values[i] for i in index]`` in one C call."""
    if len(index) < 2:
        return [values[i] for i in index]
    return list(operator.itemgetter(*index)(values))
