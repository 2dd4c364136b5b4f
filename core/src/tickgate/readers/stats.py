"""Sample summaries and histogram quantiles shared by every reader.

Readers turn per-request arrays (bench ``--save-detailed`` arrays, aiperf
records, SSE gaps) and Prometheus histograms into the ``percentiles`` objects
of the observation schema. One implementation keeps every format's numbers
comparable: exact-sample percentiles are :func:`tickgate.util.quantile.quantile`
(numpy's "linear", which is also what vLLM's and SGLang's bench clients use),
histogram quantiles use Prometheus' ``histogram_quantile`` rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..util.quantile import quantile

#: percentile keys the observation schema knows, with their quantile
SCHEMA_QUANTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def summarize(values: Iterable[float], *, ndigits: int = 6) -> dict[str, float]:
    """mean/median/std/min/max and the schema percentiles of a sample.

    ``std`` is the population standard deviation (numpy's default, as the bench
    clients report it). Values are rounded to ``ndigits`` so that float noise
    never changes an output file.
    """
    data = sorted(float(v) for v in values)
    if not data:
        return {}
    n = len(data)
    mean = math.fsum(data) / n
    var = math.fsum((v - mean) ** 2 for v in data) / n
    out = {
        "mean": mean,
        "median": quantile(data, 0.5),
        "std": math.sqrt(var),
        "min": data[0],
        "max": data[-1],
    }
    for key, q in SCHEMA_QUANTILES.items():
        out[key] = quantile(data, q)
    return {k: round(v, ndigits) for k, v in out.items()}


def histogram_quantile(
    q: float, buckets: Sequence[tuple[float, float]], total: float | None = None
) -> float | None:
    """Prometheus-style quantile from cumulative ``(upper_bound, count)`` buckets.

    Linear interpolation inside the bucket that holds the rank, with 0 as the
    lower edge of the first bucket. ``total`` is the observation count (the
    ``_count`` series, else the ``+Inf`` bucket). Returns None (unknown) when the
    rank falls in the ``+Inf`` bucket or beyond the last published bucket (an
    excerpt with trimmed buckets): Prometheus would answer with the largest
    finite bound, which silently understates a tail.
    """
    ordered = sorted(buckets)
    if total is None and ordered and math.isinf(ordered[-1][0]):
        total = ordered[-1][1]
    if not ordered or total is None or total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return None
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return None
