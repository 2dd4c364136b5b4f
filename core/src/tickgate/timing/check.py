"""``tickgate timing check``: replay measured points and compare.

Each replayable point (:mod:`.points`) runs through its scheduler with a
roofline timing model; its outcomes give the same figures the benchmark
clients print, computed as they compute them (docs/timing.md):

* throughputs over the benchmark's duration, first arrival to last finish
  (``vllm bench serve`` / ``sglang.bench_serving``: ``benchmark_duration``);
* TTFT, E2E and TPOT (``(e2e - ttft) / (output tokens - 1)``) per request;
* ITL from the report's ``latency.itl_ms`` (every gap between consecutive
  tokens; a re-timed recording, :mod:`.retime`, gives its steps' gaps instead);
* ``first_token_latency_ms`` (TensorRT-LLM's batch-1 figure): the mean TTFT.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from statistics import median
from typing import Any

import attrs

from ..util.errors import InputError, TickgateError, TickLimitExceeded
from ..util.quantile import cumulative_weights, quantile, weighted_interpolate
from .points import Point, PointSetup, Skip

__all__ = ["Prediction", "check_points", "error_summary", "predict"]


@attrs.frozen
class Prediction:
    point: Point
    predicted: dict[str, float] | None
    skipped: str | None = None
    assumed: tuple[str, ...] = ()

    def errors(self) -> dict[str, float]:
        """Relative error (predicted - measured) / measured of every key both have."""
        if not self.predicted:
            return {}
        measured = self.point.measured
        return {k: (self.predicted[k] - v) / v for k, v in measured.items() if k in self.predicted and v}


def _stats(values: list[float], prefix: str, out: dict[str, float]) -> None:
    if not values:
        return
    data = sorted(values)
    out[f"{prefix}_mean"] = sum(data) / len(data)
    out[f"{prefix}_median"] = quantile(data, 0.5)
    out[f"{prefix}_p99"] = quantile(data, 0.99)


def _gap_stats(gaps: list[tuple[float, int]], out: dict[str, float]) -> None:
    """ITL from steps: each step's duration once per token it decoded."""
    pairs = sorted((d, w) for d, w in gaps if w > 0)
    total = sum(w for _, w in pairs)
    if not total:
        return
    values, weights = [d for d, _ in pairs], [w for _, w in pairs]
    cumulative = cumulative_weights(weights)
    out["itl_ms_mean"] = sum(d * w for d, w in pairs) / total
    out["itl_ms_median"] = weighted_interpolate(values, cumulative, (total - 1) * 0.5)
    out["itl_ms_p99"] = weighted_interpolate(values, cumulative, (total - 1) * 0.99)


def figures(
    done: list[tuple[float, float, float, int, int]],
    gaps: list[tuple[float, int]] | None,
    itl: Mapping[str, Any] | None = None,
    frontend_ms: float = 0.0,
) -> dict[str, float]:
    """The benchmark clients' figures of completed requests, each (arrival, first
    token, finish, prompt tokens, output tokens) in engine ms, with the inter-token
    gaps as (duration, tokens) of the steps or the report's ``latency.itl_ms``;
    ``frontend_ms`` (the timing model's) is added to every request's TTFT and end."""
    out: dict[str, float] = {}
    if not done:
        return out
    if frontend_ms:
        done = [(a, f + frontend_ms, e + frontend_ms, p, n) for a, f, e, p, n in done]
    start = min(d[0] for d in done)
    end = max(d[2] for d in done)
    seconds = (end - start) / 1000.0
    if seconds > 0:
        outputs = sum(d[4] for d in done)
        out["output_tok_s"] = outputs / seconds
        out["request_s"] = len(done) / seconds
        out["total_tok_s"] = (outputs + sum(d[3] for d in done)) / seconds
    _stats([first - arrival for arrival, first, _, _, _ in done], "ttft_ms", out)
    _stats([finish - arrival for arrival, _, finish, _, _ in done], "e2e_ms", out)
    _stats(
        [(finish - first) / (output - 1) for _, first, finish, _, output in done if output > 1],
        "tpot_ms",
        out,
    )
    if itl:
        out["itl_ms_mean"], out["itl_ms_median"], out["itl_ms_p99"] = itl["mean"], itl["p50"], itl["p99"]
    elif gaps:
        _gap_stats(gaps, out)
    out["first_token_latency_ms"] = out["ttft_ms_mean"]
    return out


def metrics(report: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> dict[str, float]:
    """The benchmark clients' figures from a replay report whose outcomes are all listed,
    without the requests named in ``skip`` (a closed loop's warm-up)."""
    done = [
        (o["arrival_ms"], o["first_token_ms"], o["finished_ms"], o["prompt_tokens"], o["output_tokens"])
        for o in report.get("outcomes", ())
        if o.get("status") == "completed" and o.get("id") not in skip
    ]
    itl = (report.get("latency") or {}).get("itl_ms")
    frontend = ((report.get("inputs") or {}).get("timing") or {}).get("options", {}).get("frontend_ms", 0.0)
    return figures(done, None, itl, frontend)


@contextlib.contextmanager
def located(setup: PointSetup, policy_path: str) -> Iterator[None]:
    """Errors about the policy tickgate wrote for a replay (a temporary file, gone when the
    user reads them) named in the user's file and place (:class:`.points.Origin`)."""
    origin = setup.origin
    try:
        yield
    except InputError as exc:
        if origin is None or exc.path != policy_path:
            raise  # about another file (a model's config.json): named already
        raise origin.error(exc.message, exc.json_path) from None
    except TickLimitExceeded as exc:
        if origin is None:
            raise
        raise origin.error(str(exc), "$.limits.max_ticks") from None
    except TickgateError as exc:
        if origin is None:
            raise
        raise origin.error(str(exc).replace(policy_path, "its policy")) from None


def setup_policy(setup: PointSetup) -> Any:
    """The point's policy document loaded as a policy file is (validated, plugins built)."""
    from ..host.policy import load_policy

    with tempfile.TemporaryDirectory(prefix="tickgate-check-") as tmp:
        path = Path(tmp) / "policy.json"
        path.write_text(json.dumps(setup.policy, sort_keys=True), encoding="utf-8")
        with located(setup, str(path)):
            return load_policy(path)


def replay_setup(setup: PointSetup, policy: Any = None) -> dict[str, Any]:
    """Replay a point's policy (``policy``: already loaded from it) and requests in this
    process; the report, every outcome listed."""
    from ..simulate import replay

    policy = policy if policy is not None else setup_policy(setup)
    with located(setup, str(policy.path)):
        return replay(
            setup.requests,
            policy,
            detail_limit=len(setup.requests) + 1,
            max_concurrency=setup.max_concurrency,
        )


def predict(point: Any, setup: PointSetup, policy: Any = None) -> dict[str, float]:
    """The figures of ``point`` that a replay of ``setup`` predicts (the keys it measured)."""
    skip = frozenset(r.id for r in setup.requests[: setup.warmup])
    got = metrics(replay_setup(setup, policy), skip)
    names = getattr(point, "figures", {})
    return {k: got[names.get(k, k)] for k in point.measured if names.get(k, k) in got}


def _chosen(point: Any, factors: Callable[[str], Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    return factors(point.family) if factors is not None and point.family else None


def prepare(
    points: list[Any], factors: Callable[[str], Mapping[str, Any]] | None = None
) -> list[Any | str | None]:
    """Set every measurement up and load its policy, before anything is replayed: a point
    tickgate refuses is one error naming its file and line now, not after the points
    before it replayed. Per point: its loaded policy, why it is skipped (a string), or
    None (priced directly, no replay). The requests are not kept (they are built again,
    one point at a time, when it replays)."""
    ready: list[Any | str | None] = []
    for point in points:
        if point.direct:
            ready.append(None)
            continue
        try:
            setup = point.setup(_chosen(point, factors))
        except Skip as exc:
            ready.append(str(exc))
            continue
        try:
            ready.append(setup_policy(setup))
        except TickgateError as exc:
            if not getattr(point, "refusals_skip", False):
                raise
            ready.append(f"refused: {getattr(exc, 'message', None) or exc}")
    return ready


def check_points(
    points: list[Any], factors: Callable[[str], Mapping[str, Any]] | None = None
) -> list[Prediction]:
    """Replay (or price) every measurement; ``factors`` gives an engine family's
    factors (:meth:`tickgate.timing.fit.TimingFile.factors_for`). Every point is set up
    first (:func:`prepare`)."""
    from .roofline import RooflineTiming

    results = []
    for point, ready in zip(points, prepare(points, factors)):
        chosen = _chosen(point, factors)
        if isinstance(ready, str):
            results.append(Prediction(point, None, ready))
        elif ready is None:
            try:
                results.append(Prediction(point, point.predict(RooflineTiming(point.options(chosen)))))
            except Skip as exc:
                results.append(Prediction(point, None, str(exc)))
        else:
            setup = point.setup(chosen)
            try:
                results.append(Prediction(point, predict(point, setup, ready), None, setup.assumed))
            except TickgateError as exc:
                if not getattr(point, "refusals_skip", False):
                    raise
                results.append(Prediction(point, None, f"refused: {getattr(exc, 'message', None) or exc}"))
    return results


def error_summary(results: Iterable[Prediction]) -> dict[str, float | int]:
    """Median absolute percentage error over every predicted value, the share
    within a factor of 1.5, and the counts."""
    errors = [e for r in results for e in r.errors().values()]
    if not errors:
        return {"values": 0}
    ratios = [1 + e for e in errors]
    within = sum(1 for q in ratios if q > 0 and max(q, 1 / q) <= 1.5)
    return {
        "values": len(errors),
        "median_ape": median(abs(e) for e in errors),
        "within_1_5x": within / len(errors),
    }
