"""``tickgate timing fit RUN... --deployment D.yaml``: a ``linear`` deployment's factors fitted to
benchmark client runs of it.

Each run is read once (:func:`tickgate.timing.run_check.load_run`) and replayed under the
deployment with trial factors, joined with what the client measured as ``timing check`` does.
The objective is the sum of squared relative errors ``(predicted - measured) / measured`` of
every joined request's TTFT and ITL (each request weighs once per figure, whatever its length).

Why Gauss-Newton and not a coordinate search: the replay is linear in the factors for a fixed
schedule (a step's time is a linear form of its counts; ``frontend_ms`` is added per request),
so the least-squares step is closed form once the schedule is known. Each iteration replays
under the current factors and under each factor nudged by :data:`NUDGE` (the Jacobian, by
finite differences, which also follows the schedule where it moves), solves the damped normal
equations in column-scaled space, clamps factors at 0 and rounds them to 4 significant digits
(what is written, so the file is the same bytes on every run). Six replays per iteration and a
handful of iterations instead of hundreds of replays; the fit stops when the rounded factors
stop moving. The damping (:data:`RIDGE`) keeps a factor the runs cannot tell from another
(``frontend_ms`` and ``per_prefill_token_ms`` when every prompt has one length) near the
deployment's value instead of letting the pair wander off in opposite directions.

The factors' uncertainty is a bootstrap over requests on the final linearisation: requests
drawn with replacement (:data:`BOOTSTRAP` resamples, ``random.Random(SEED)``), the least-squares
step re-solved for each, and each factor's 5-95 % range reported. No replay per resample, so
it is cheap; it does not see schedule changes, which are small next to request jitter here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError
from ..util.quantile import quantile
from .run_check import _summary, deployment_policy, join, load_run

__all__ = ["FACTORS", "FitResult", "fit_runs", "render"]

#: the linear model's free factors, in the order the fit solves and writes them
FACTORS = ("fixed_ms", "per_prefill_token_ms", "per_decode_seq_ms", "per_context_token_ms", "frontend_ms")
#: the figures the objective compares per request
FIGURES = ("ttft_ms", "itl_ms")
#: a factor's finite-difference step: this share of its value, at least its floor (a factor at 0)
NUDGE = 0.1
NUDGE_FLOOR = {
    "fixed_ms": 0.1,
    "per_prefill_token_ms": 0.001,
    "per_decode_seq_ms": 0.01,
    "per_context_token_ms": 0.0001,
    "frontend_ms": 0.1,
}
#: damping on the column-scaled normal equations (each column's squared norm is 1)
RIDGE = 1e-3
ITERATIONS = 12
#: the shares of a Gauss-Newton step tried in turn until the replayed error goes down
HALVINGS = (1.0, 0.5, 0.25, 0.125)
BOOTSTRAP = 20
SEED = 0
#: a held-out run outside the fitted runs' range of a length or of load by more than this share is warned about
EXTRAPOLATION = 0.1


def _round(value: float) -> float:
    return 0.0 if value == 0 else float(f"{value:.4g}")


class _Runs:
    """The runs, each loaded once, replayed under the deployment with given factors."""

    def __init__(self, paths: Sequence[Path], deployment: Path) -> None:
        self.policy, self.origin = deployment_policy(deployment, None)
        self.loaded = [load_run(path, "auto") for path in paths]
        self.paths = list(paths)

    def with_factors(self, factors: Mapping[str, float]) -> dict[str, Any]:
        """The deployment's policy, its timing options replaced by ``factors``."""
        timing = self.policy["timing"]
        return {**self.policy, "timing": {**timing, "options": {**(timing.get("options") or {}), **factors}}}

    def rows(self, factors: Mapping[str, float]) -> list[tuple[str, str, float, float]]:
        """(run index:request id, figure, measured, predicted) of every joined request's TTFT and
        ITL with a measured value above 0, in a fixed order."""
        policy = self.with_factors(factors)
        out = []
        for n, loaded in enumerate(self.loaded):
            rows, _ = join(loaded, policy, self.origin)
            for row in rows:
                for figure in FIGURES:
                    m, p = row["measured"][figure], row["predicted"][figure]
                    if m and p is not None:
                        out.append((f"{n}:{row['id']}", figure, float(m), float(p)))
        return out

    def summary(self, factors: Mapping[str, float]) -> dict[str, Any]:
        policy = self.with_factors(factors)
        rows = [r for loaded in self.loaded for r in join(loaded, policy, self.origin)[0]]
        return _summary(rows)

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Prompt and output lengths and load (requests sent per second in an open loop, the
        client's concurrency in a closed one) over the runs: what a held-out run is compared with."""
        found: dict[str, list[float]] = {}
        for _, _, requests, concurrency, _ in self.loaded:
            found.setdefault("prompt tokens", []).extend(r.prompt_tokens for r in requests)
            found.setdefault("output tokens", []).extend(r.max_output_tokens for r in requests)
            if concurrency is not None:
                found.setdefault("client concurrency", []).append(concurrency)
            arrivals = sorted(r.arrival_ms for r in requests if r.arrival_ms is not None)
            if concurrency is None and len(arrivals) > 1 and arrivals[-1] > arrivals[0]:
                rate = (len(arrivals) - 1) * 1000.0 / (arrivals[-1] - arrivals[0])
                found.setdefault("requests per second", []).append(rate)
        return {k: (min(v), max(v)) for k, v in found.items() if v}


def extrapolation(
    fitted: Mapping[str, tuple[float, float]], held: Mapping[str, tuple[float, float]]
) -> list[str]:
    """Where a held-out run goes beyond the fitted runs by more than :data:`EXTRAPOLATION`."""
    warnings = []
    for key, (low, high) in held.items():
        if key not in fitted:
            warnings.append(
                f"its {key} ({low:.4g} .. {high:.4g}) is not in the fitted runs: the fit extrapolates"
            )
            continue
        f_low, f_high = fitted[key]
        if low < f_low * (1 - EXTRAPOLATION) or high > f_high * (1 + EXTRAPOLATION):
            warnings.append(
                f"its {key} ({low:.4g} .. {high:.4g}) is outside the fitted runs' ({f_low:.4g} .. {f_high:.4g}): "
                "the fit extrapolates"
            )
    return warnings


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the system is 5 x 5 at most)."""
    n = len(vector)
    a = [[*row, vector[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: (abs(a[r][col]), -r))
        a[col], a[pivot] = a[pivot], a[col]
        if a[col][col] == 0:
            continue
        for r in range(col + 1, n):
            f = a[r][col] / a[col][col]
            for c in range(col, n + 1):
                a[r][c] -= f * a[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        if a[r][r] == 0:
            continue
        x[r] = (a[r][n] - sum(a[r][c] * x[c] for c in range(r + 1, n))) / a[r][r]
    return x


def _step(
    jac: list[list[float]], res: list[float], weights: list[int], current: Mapping[str, float]
) -> dict[str, float]:
    """The damped least-squares step's new factors (clamped at 0: a factor that would go below
    is held at 0 and the others re-solved)."""
    free = [j for j in range(len(FACTORS)) if any(row[j] for row in jac)]
    while True:
        norms = [math.sqrt(sum(w * row[j] ** 2 for row, w in zip(jac, weights))) for j in free]
        ata = [
            [
                sum(w * row[a] * row[b] for row, w in zip(jac, weights)) / (na * nb)
                + (RIDGE if a == b else 0.0)
                for b, nb in zip(free, norms)
            ]
            for a, na in zip(free, norms)
        ]
        atr = [
            -sum(w * row[a] * r for row, r, w in zip(jac, res, weights)) / na for a, na in zip(free, norms)
        ]
        z = _solve(ata, atr)
        new = dict(current)
        for j, zj, nj in zip(free, z, norms):
            new[FACTORS[j]] = current[FACTORS[j]] + zj / nj
        negative = [j for j in free if new[FACTORS[j]] < 0]
        if not negative:
            return new
        for j in negative:
            free.remove(j)
            new[FACTORS[j]] = 0.0
        # held at 0: its move from the current value is part of the residual the others fit
        res = [r - sum(row[j] * current[FACTORS[j]] for j in negative) for row, r in zip(jac, res)]
        current = {**current, **{FACTORS[j]: 0.0 for j in negative}}
        if not free:
            return new


@attrs.frozen
class FitResult:
    """The deployment's factors and the fitted ones, the error on the fitted runs and on each
    held-out run (with its extrapolation warnings), and each factor's bootstrap range."""

    start: dict[str, float]
    factors: dict[str, float]
    iterations: int
    in_sample: dict[str, Any]
    ranges: dict[str, tuple[float, float]]
    holdout: list[tuple[Path, dict[str, Any], list[str]]]


def _cost(rows: list[tuple[str, str, float, float]]) -> float:
    """The objective: the sum of squared relative errors, as replayed (not linearised)."""
    return sum(((p - m) / m) ** 2 for _, _, m, p in rows)


def _linearise(
    runs: _Runs, factors: dict[str, float], base: list[tuple[str, str, float, float]]
) -> tuple[list[str], list[list[float]], list[float]]:
    """The residuals at ``factors`` (``base``: the runs' rows replayed under them) and their
    Jacobian by finite differences, one replay per factor."""
    keys = [(k, f) for k, f, _, _ in base]
    jac = [[0.0] * len(FACTORS) for _ in base]
    for j, name in enumerate(FACTORS):
        h = max(abs(factors[name]) * NUDGE, NUDGE_FLOOR[name])
        nudged = {(k, f): p for k, f, _, p in runs.rows({**factors, name: factors[name] + h})}
        for i, (k, f, m, p) in enumerate(base):
            q = nudged.get((k, f))
            jac[i][j] = 0.0 if q is None else (q - p) / h / m
    res = [(p - m) / m for _, _, m, p in base]
    return [k for k, _ in keys], jac, res


def fit_runs(runs: Sequence[Path], deployment: Path, holdouts: Sequence[Path]) -> FitResult:
    """Fit the deployment's linear factors to ``runs``; the error on them and on ``holdouts``."""
    fitted_runs = _Runs(runs, deployment)
    timing = fitted_runs.policy["timing"]
    if timing.get("name") != "linear":
        from ..util.locations import load_yaml

        line, column = load_yaml(deployment)[1].get("$.timing.name", (None, None))
        raise InputError(
            deployment,
            f"timing fit with --deployment fits the 'linear' timing model's factors; this deployment is "
            f"timed by {timing.get('name')!r} (fit a roofline with --base)",
            line=line,
            column=column,
            json_path="$.timing.name",
        )
    held = [_Runs([path], deployment) for path in holdouts]  # every input read before the fit
    options = timing.get("options") or {}
    start = {k: _round(float(options.get(k, 0.0))) for k in FACTORS}
    current = dict(start)
    rows = fitted_runs.rows(current)
    cost = _cost(rows)
    iterations = 0
    while iterations < ITERATIONS:
        iterations += 1
        _, jac, res = _linearise(fitted_runs, current, rows)
        proposal = _step(jac, res, [1] * len(res), current)
        moved = False
        for share in HALVINGS:
            trial = {k: _round(max(current[k] + share * (proposal[k] - current[k]), 0.0)) for k in FACTORS}
            if trial == current:
                break  # the step is below the written resolution
            trial_rows = fitted_runs.rows(trial)
            trial_cost = _cost(trial_rows)
            if trial_cost < cost:
                current, rows, cost, moved = trial, trial_rows, trial_cost, True
                break
        if not moved:
            break  # no share of the step lowers the replayed error: a minimum at this resolution
    keys, jac, res = _linearise(fitted_runs, current, rows)
    ranges = _bootstrap(keys, jac, res, current)
    fitted_ranges = fitted_runs.ranges()
    holdout = [(h.paths[0], h.summary(current), extrapolation(fitted_ranges, h.ranges())) for h in held]
    return FitResult(start, current, iterations, fitted_runs.summary(current), ranges, holdout)


def _bootstrap(
    keys: list[str], jac: list[list[float]], res: list[float], factors: dict[str, float]
) -> dict[str, tuple[float, float]]:
    """Each factor's 5-95 % range over :data:`BOOTSTRAP` resamples of the requests."""
    requests = sorted(set(keys))
    rows_of: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        rows_of.setdefault(key, []).append(i)
    rng = random.Random(SEED)
    draws: dict[str, list[float]] = {k: [] for k in FACTORS}
    # centred on the fit: a resample's step less the whole sample's (which the replay refused)
    whole = _step(jac, res, [1] * len(keys), factors)
    for _ in range(BOOTSTRAP):
        weights = [0] * len(keys)
        for _ in requests:
            for i in rows_of[requests[rng.randrange(len(requests))]]:
                weights[i] += 1
        found = _step(jac, res, weights, factors)
        for k in FACTORS:
            draws[k].append(max(factors[k] + found[k] - whole[k], 0.0))
    return {
        k: (_round(quantile(sorted(v), 0.05)), _round(quantile(sorted(v), 0.95))) for k, v in draws.items()
    }


def _figures(summary: Mapping[str, Any]) -> str:
    parts = []
    for figure, label in (("ttft_ms", "TTFT"), ("itl_ms", "ITL")):
        block = summary.get(figure)
        if block is None:
            parts.append(f"{label}: no requests")
            continue
        parts.append(
            f"{label} MdAPE {block.get('mdape', 0) * 100:.1f} %, bias {block.get('bias', 0) * 100:+.1f} %, "
            f"mean measured {block['measured']['mean']:.4g} / predicted {block['predicted']['mean']:.4g} ms"
        )
    n = max((b.get("requests", 0) for b in summary.values()), default=0)
    return f"{n} requests: " + "; ".join(parts)


def report_lines(result: FitResult) -> list[str]:
    """The fit's figures, one per line: the output's comments and what the command prints."""
    lines = [f"in-sample, {_figures(result.in_sample)}"]
    for path, summary, warnings in result.holdout:
        lines.append(f"held out {path}, {_figures(summary)}")
        lines += [f"warning: {path}: {w}" for w in warnings]
    lines.append(
        f"factors' 5-95 % range (bootstrap over requests, {BOOTSTRAP} resamples, seed {SEED}; "
        f"Gauss-Newton, {result.iterations} iterations):"
    )
    for k in FACTORS:
        low, high = result.ranges[k]
        lines.append(f"  {k}: {result.factors[k]!r} ({low!r} .. {high!r}; deployment's {result.start[k]!r})")
    return lines


def render(result: FitResult, command: str) -> str:
    """FITTED.yaml's bytes: the comments, then the timing section ``timing check --timing`` reads."""
    lines = [f"# {command}", *(f"# {line}" for line in report_lines(result))]
    lines += ["timing:", "  name: linear", "  options:"]
    lines += [f"    {k}: {result.factors[k]!r}" for k in FACTORS]
    return "\n".join(lines) + "\n"
