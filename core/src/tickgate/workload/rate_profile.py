"""Time-varying traffic for ``tickgate generate --rate-profile``: a piecewise-linear request rate
r(t) and the arrivals of a non-homogeneous Poisson (or gamma) process that follows it
(docs/workload.md, "Traffic that changes through the day").

Arrivals are drawn by *time rescaling*: intervals of mean 1 (exponential, or gamma of shape
``burstiness`` and scale ``1 / burstiness``) are summed in "operational time" s, and each sum is
mapped back to clock time through the inverse of the cumulative rate Λ(t) = ∫₀ᵗ r. A unit-rate
Poisson process in s is then a Poisson process of rate r(t) in t (Brown et al., "The time-rescaling
theorem and its application to neural spike train data analysis", Neural Computation 14, 2002): the
expected number of arrivals in [a, b] is Λ(b) - Λ(a), whatever the shape. The intervals come from
numpy's legacy ``RandomState(seed)``, as ``--rate``'s do, so the same arguments give the same
times on any install; drawing stops at the profile's last time (or at ``--requests``).

Λ is piecewise quadratic, so its inverse on a segment is a root of a quadratic, computed in the form
that needs no division by the slope (flat segments are the same formula).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError
from ..util.locations import load_yaml
from ..util.schemas import load_schema, validate

#: the ``day`` preset: the relative request rate at 00:00, 01:00, ..., 23:00 (peak 1.0). Modelled,
#: not measured (docs/workload.md says on what): a night trough near 0.25 around 04:00, a morning
#: ramp from 06:00, a working-day plateau peaking at 14:00, a smaller evening shoulder, a decline to
#: midnight. The profile closes the day with the 00:00 value again at 24:00.
DAY_SHAPE: tuple[float, ...] = (
    0.42, 0.34, 0.29, 0.26, 0.25, 0.27, 0.33, 0.45,  # 00-07
    0.62, 0.80, 0.92, 0.97, 0.95, 0.96, 1.00, 0.98,  # 08-15
    0.93, 0.85, 0.76, 0.72, 0.74, 0.70, 0.60, 0.50,  # 16-23
)  # fmt: skip

#: the ``workday`` preset: one region's working day (peak 1.0), as a company's own fleet sees it when
#: its users are in one time zone. Modelled, not measured (docs/workload.md): nights at 7-10 % of
#: the peak (automation, a few late users), a ramp from 07:00, a plateau from 10:00 to 16:00 with a
#: lunch dip at 12:00, a decline through the evening.
WORKDAY_SHAPE: tuple[float, ...] = (
    0.10, 0.08, 0.07, 0.07, 0.07, 0.09, 0.15, 0.30,  # 00-07
    0.55, 0.80, 0.95, 1.00, 0.85, 0.90, 1.00, 0.97,  # 08-15
    0.88, 0.70, 0.48, 0.35, 0.28, 0.22, 0.17, 0.13,  # 16-23
)  # fmt: skip

#: preset name -> the relative rates it repeats over ``--period``
PRESETS: dict[str, tuple[float, ...]] = {"day": DAY_SHAPE, "workday": WORKDAY_SHAPE}

#: seconds in the day a preset's hourly points span
DAY_S = 86400.0

#: the most requests a profile may call for without ``--requests`` (``--requests``' own bound)
MAX_EXPECTED = 10_000_000

#: intervals drawn at a time: the stream is the same whatever the chunk, the memory bounded
_CHUNK = 1 << 16


@attrs.frozen
class RateProfile:
    """``(time_s, rate_per_s)`` points, times strictly increasing from 0, rates >= 0; ``source``
    says where they came from (recorded in the workload header)."""

    points: tuple[tuple[float, float], ...]
    source: dict[str, Any] = attrs.field(eq=False)

    @property
    def end_s(self) -> float:
        return self.points[-1][0]

    @property
    def peak(self) -> float:
        return max(rate for _, rate in self.points)

    def expected_requests(self) -> float:
        """Λ at the last time: the mean number of arrivals the profile draws."""
        return float(_cumulative(self.points)[-1])

    def to_json(self) -> dict[str, Any]:
        return {**self.source, "points": [[_plain(t), _plain(r)] for t, r in self.points]}


def _plain(value: float) -> float | int:
    """Whole numbers written as integers (``14400``, not ``14400.0``) in the header."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def preset(name: str, *, peak_rate: float, period_s: float) -> RateProfile:
    """A preset's hourly shape, its 24 hours compressed into ``period_s`` seconds and scaled so its
    peak is ``peak_rate`` requests per second."""
    shape = PRESETS[name]
    step = period_s / len(shape)
    top = max(shape)
    rates = [*shape, shape[0]]  # the day closes where it opened
    # rounded to 1e-9 req/s: the header shows 1.26, not 1.2599999999999998
    points = tuple((i * step, round(rate / top * peak_rate, 9)) for i, rate in enumerate(rates))
    return RateProfile(points, {"preset": name, "peak_rate": _plain(peak_rate), "period_s": _plain(period_s)})


def load(path: Path) -> RateProfile:
    """A profile file (JSON or YAML, schemas/rate-profile.schema.json); every error is one
    located line (exit 2)."""
    data, locs = load_yaml(path)  # YAML is a superset of JSON: one loader, located errors for both
    points = data.get("points") if isinstance(data, dict) else None
    if isinstance(points, list) and len(points) < 2:  # the schema would only say "too short"
        raise InputError(
            path, f"{len(points)} point(s); expected at least 2 [time_s, rate] points", **_at(locs)
        )
    validate(data, load_schema("rate-profile.schema.json"), file=path, locations=locs)
    points = data["points"]
    first = points[0][0]
    if first != 0:
        raise InputError(path, f"the first time is {first!r}; expected 0", **_at(locs, 0, 0))
    for i in range(1, len(points)):
        before, now = points[i - 1][0], points[i][0]
        if now <= before:
            raise InputError(
                path,
                f"time {now!r} does not come after the time before it ({before!r}); "
                "expected strictly increasing times",
                **_at(locs, i, 0),
            )
    if not any(rate > 0 for _, rate in points):
        raise InputError(
            path, "every rate is 0: no request would arrive; expected a rate above 0", **_at(locs)
        )
    return RateProfile(tuple((float(t), float(r)) for t, r in points), {"file": str(path)})


def _at(locs: dict[str, tuple[int, int]], *index: int) -> dict[str, Any]:
    from ..util.locations import json_path

    where = json_path(["points", *index])
    line, column = locs.get(where, locs.get(json_path(["points", *index[:1]]), (None, None)))
    return {"line": line, "column": column, "json_path": where}


def _cumulative(points: Sequence[tuple[float, float]]) -> Any:
    """Λ at each point: the trapezoids of the segments before it, summed."""
    import numpy as np

    times = np.array([t for t, _ in points], dtype=np.float64)
    rates = np.array([r for _, r in points], dtype=np.float64)
    areas = (rates[1:] + rates[:-1]) * 0.5 * np.diff(times)
    return np.concatenate(([0.0], np.cumsum(areas)))


def arrival_times_s(profile: RateProfile, *, burstiness: float, seed: int, cap: int | None) -> Any:
    """Arrival times (s, float64 array, non-decreasing) of the process that follows ``profile``,
    up to its last time and at most ``cap`` of them. Capped draws are the first ``cap`` of the
    uncapped ones (the stream does not depend on the cap)."""
    import numpy as np

    times = np.array([t for t, _ in profile.points], dtype=np.float64)
    rates = np.array([r for _, r in profile.points], dtype=np.float64)
    lam = _cumulative(profile.points)
    total = float(lam[-1])
    rng = np.random.RandomState(seed)
    chunks = []
    reached = 0.0  # operational time of the last arrival drawn so far
    count = 0
    while cap is None or count < cap:
        size = _CHUNK if cap is None else min(_CHUNK, cap - count)
        if math.isinf(burstiness):
            steps = np.ones(size)  # evenly spaced in operational time
        else:
            steps = rng.gamma(shape=burstiness, scale=1.0 / burstiness, size=size)
        sums = reached + np.cumsum(steps)
        inside = sums[sums <= total]  # sums increase: the kept ones are a prefix
        chunks.append(inside)
        count += len(inside)
        if len(inside) < size:
            break
        reached = float(sums[-1])
    s = np.concatenate(chunks) if chunks else np.zeros(0)
    # segment i holds s when lam[i] < s <= lam[i+1]: never a segment that adds nothing
    seg = np.clip(np.searchsorted(lam, s, side="left") - 1, 0, len(times) - 2)
    start, width = times[seg], times[seg + 1] - times[seg]
    r0 = rates[seg]
    slope = (rates[seg + 1] - r0) / width
    d = s - lam[seg]
    # r0*u + slope/2*u**2 = d, solved as 2d / (r0 + sqrt(r0**2 + 2*slope*d)): no 0/0 when flat
    root = np.sqrt(np.maximum(r0 * r0 + 2.0 * slope * d, 0.0))
    denominator = r0 + root
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(denominator > 0, 2.0 * d / denominator, 0.0)
    t = start + np.clip(u, 0.0, width)
    return np.maximum.accumulate(t) if len(t) else t  # rounding never reorders two arrivals


def describe(profile: RateProfile) -> str:
    """How the header's description names the profile."""
    if "preset" in profile.source:
        return (
            f"the {profile.source['preset']} rate profile (peak {profile.peak:g} req/s, "
            f"period {profile.end_s:g} s)"
        )
    return f"the rate profile {Path(profile.source['file']).name} (peak {profile.peak:g} req/s, {profile.end_s:g} s)"
