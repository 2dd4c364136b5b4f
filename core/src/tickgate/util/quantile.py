"""The one quantile function: replay reports, readers and gate signals all use it.

A p95 must mean the same thing in a replay report, a normalized observation and
a gate decision, so there is one convention and one interpolation rule:

* ``q`` is a fraction in 0..1 (``numpy.quantile``'s convention; ``numpy.percentile``
  takes 0..100). Values come already sorted: callers sort once and ask for
  several quantiles.
* One method, numpy's ``method="linear"`` (its default and R's, Hyndman & Fan
  type 7; also what vLLM's and SGLang's bench clients report through numpy):
  the virtual index ``(n - 1) * q`` is interpolated between its two closest
  ranks. The three copies this replaced (``report.percentile``,
  ``gate.stats.quantile``, ``readers.stats.percentile``) all used it; a figure
  that needs another rule should add numpy's name for it here as an argument.

The replay report (``report.distribution``) has always placed the index from a
whole percent p as ``(n - 1) * p / 100``. That differs in the last bit from
``(n - 1) * (p / 100)`` for about a third of all n at p95, so the report calls
:func:`interpolate` with its own index and every report stays byte-identical.

Weighted values (:func:`weighted_interpolate`, :func:`weighted_quantile`): a
value with weight w stands for w equal values; the answer is :func:`interpolate`'s
on that expanded multiset, bit for bit, found from cumulative weights without
expanding it (the replay report's ``latency.itl_ms``: each engine step stands
for the inter-token gaps of every token it sampled).

Not here: Prometheus' bucket rule (``readers.stats.histogram_quantile``), the
vLLM mirror's nearest rank over a histogram of step sizes (numpy's
"inverted_cdf", ``tickgate_vllm.v1.summary``), and the exact fast paths of the gate
(``gate.stats.select_quantile``, ``gate.tails``),
which find the two order statistics without a full sort and then interpolate
as :func:`quantile` does (tests compare them with it).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate


def interpolate(sorted_values: Sequence[float], index: float) -> float:
    """The value at the fractional 0-based ``index`` (0 <= index <= n - 1) of
    sorted values, linear between the two values around it."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    lo = int(index)
    hi = lo + 1 if lo + 1 < n else lo
    frac = index - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 <= q <= 1) of already sorted values (numpy's "linear")."""
    return interpolate(sorted_values, (len(sorted_values) - 1) * q)


def cumulative_weights(weights: Sequence[int]) -> list[int]:
    """Running totals of integer ``weights`` (what :func:`weighted_interpolate` takes)."""
    return list(accumulate(weights))


def weighted_interpolate(sorted_values: Sequence[float], cumulative: Sequence[int], index: float) -> float:
    """:func:`interpolate` over the multiset in which ``sorted_values[i]`` appears
    ``cumulative[i] - cumulative[i - 1]`` times (``cumulative``: the running totals
    of non-negative integer weights, :func:`cumulative_weights`; a value of weight
    0 is not in the multiset), without expanding it: 0 <= index <= total weight - 1.

    The two ranks around ``index`` are found by bisection in the running totals and
    interpolated with :func:`interpolate`'s own expression: the same float.
    """
    n = len(sorted_values)
    if n == 0 or len(cumulative) != n:
        raise ValueError("no values" if n == 0 else "one cumulative weight per value")
    total = cumulative[-1]
    if total <= 0:
        raise ValueError("no values")
    lo = int(index)
    hi = lo + 1 if lo + 1 < total else lo
    frac = index - lo
    i = bisect_right(cumulative, lo)  # element k is the first value whose running total exceeds k
    j = bisect_right(cumulative, hi, i)
    return sorted_values[i] + (sorted_values[j] - sorted_values[i]) * frac


def weighted_quantile(sorted_values: Sequence[float], weights: Sequence[int], q: float) -> float:
    """The ``q`` quantile (0 <= q <= 1) of already sorted values, each standing for
    ``weights[i]`` (a non-negative integer) equal values: :func:`quantile` of the
    expanded list, bit for bit (numpy's "linear" on ``numpy.repeat(values, weights)``)."""
    cumulative = cumulative_weights(weights)
    if not cumulative or cumulative[-1] <= 0:
        raise ValueError("no values")
    return weighted_interpolate(sorted_values, cumulative, (cumulative[-1] - 1) * q)
