"""What ``tickgate timing fit`` and ``check`` compare with, besides measured points.

* **A benchmark client's run** (``vllm bench serve --save-result``,
  ``sglang.bench_serving`` output, any file ``tickgate normalize`` reads, or its
  neutral observations): replayed with the server settings of the base file (a
  policy: its ``scheduler`` section and a ``roofline`` timing section naming the
  model and GPU). The workload is the run's own requests (prompt and output
  tokens each, sent at ``start_ms`` when the client recorded it, else as a Poisson
  process at the run's ``request_rate``, else all at once); the measured figures
  are its aggregates (throughputs, TTFT, TPOT, ITL and end-to-end latency: mean,
  median, p99).
* **TensorRT-LLM iteration statistics** (``getLatestIterationStats()`` /
  ``trtllm-bench --iteration_log`` / ``trtllm-serve`` ``/metrics``: one JSON
  object per iteration, in a JSON array or one per line): each iteration with a
  latency is one measured step, priced directly (no replay) from its batch:
  ``numCtxTokens`` prompt tokens in ``numContextRequests`` chunks (assumed equal
  and from the start of their prompts), ``numGenRequests`` decoding sequences
  reading the KV cache in use (``usedNumBlocks x tokensPerBlock``, less the
  chunks' own tokens). The base's timing section gives the model and GPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..interfaces.model import Request
from ..util.errors import InputError
from ..util.jsonio import loads
from ..util.locations import json_error
from .points import Origin, PointSetup, Skip

__all__ = ["IterationLog", "ObservedRun", "read_iteration_log", "read_measurements", "read_observed_run"]

#: neutral aggregate -> measured key prefix
_DISTRIBUTIONS = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_ms", "latency_ms": "e2e_ms"}
_FAMILIES = {"vllm-v1": "vllm", "sglang": "sglang", "trtllm": "trtllm"}


def _base_family(base_policy: Mapping[str, Any]) -> str:
    options = (base_policy.get("timing") or {}).get("options") or {}
    if options.get("engine"):
        return str(options["engine"])
    name = (base_policy.get("scheduler") or {}).get("name")
    return _FAMILIES.get(str(name), "generic")


@attrs.frozen
class ObservedRun:
    """A benchmark client's run, replayed under the base policy."""

    id: str
    measured: dict[str, float]
    family: str
    base_policy: Mapping[str, Any]
    requests: tuple[Request, ...]
    #: the base file (the policy's scheduler section comes from it: errors name it)
    base_path: Path | None = None
    direct = False

    def options(self, factors: Mapping[str, Any] | None) -> dict[str, Any]:
        from .roofline import FACTORS

        options = dict((self.base_policy.get("timing") or {}).get("options") or {})
        options.setdefault("engine", self.family)
        options.update({k: v for k, v in (factors or {}).items() if k in FACTORS})
        return options

    def setup(self, factors: Mapping[str, Any] | None) -> PointSetup:
        policy = {k: v for k, v in self.base_policy.items() if k not in ("gate", "fitted")}
        policy["timing"] = {"name": "roofline", "options": self.options(factors)}
        origin = None
        if self.base_path is not None:  # the policy is the base's, at the same paths
            origin = Origin(self.base_path, f"the base policy of benchmark run {self.id}", paths={"$": "$"})
        return PointSetup(policy, list(self.requests), origin=origin)


def read_observed_run(path: Path, base: Mapping[str, Any], base_path: Path) -> ObservedRun:
    """A client's run: a file ``tickgate normalize`` reads, or its output."""
    from ..gate.detect import read_observations

    doc = read_observations(path)  # first: a file that is no benchmark run is named as such
    if "scheduler" not in base:
        raise InputError(
            base_path,
            f"a benchmark run ({path}) is replayed with the server's settings: "
            "the base file must be a policy with a 'scheduler' section",
            json_path="$.scheduler",
        )
    agg = doc["run"].get("aggregates") or {}
    measured: dict[str, float] = {}
    for key, prefix in (("output_throughput", "output_tok_s"), ("request_throughput", "request_s")):
        if isinstance(agg.get(key), (int, float)):
            measured[prefix] = float(agg[key])
    extra = agg.get("extra") or {}
    for key in ("total_token_throughput", "total_throughput"):
        if isinstance(extra.get(key), (int, float)):
            measured["total_tok_s"] = float(extra[key])
            break
    for key, prefix in _DISTRIBUTIONS.items():
        dist = agg.get(key) or {}
        for stat, name in (("mean", "mean"), ("median", "median"), ("p99", "p99")):
            if isinstance(dist.get(stat), (int, float)):
                measured[f"{prefix}_{name}"] = float(dist[stat])
    for key, value in list(measured.items()):
        if not math.isfinite(value) or value < 0:
            raise InputError(
                path, f"a benchmark run's figures are finite and not negative; its {key} is {value}"
            )
        if value == 0:
            del measured[key]  # nothing to compare a relative error with (TPOT of one-token outputs)
    rows = [r for r in doc.get("requests") or () if not r.get("error")]
    if not rows or any(
        not isinstance(r.get("tokens_in"), int) or not isinstance(r.get("tokens_out"), int) for r in rows
    ):
        raise InputError(
            path,
            "a benchmark run needs per-request prompt and output token counts "
            "(vllm bench serve --save-detailed, sglang.bench_serving --output-details)",
        )
    rate = extra.get("request_rate")
    if all(isinstance(r.get("start_ms"), (int, float)) for r in rows):
        first = min(r["start_ms"] for r in rows)
        arrivals = [float(r["start_ms"]) - first for r in rows]
    elif isinstance(rate, (int, float)) and 0 < rate < float("inf"):
        import numpy as np

        gaps = np.random.RandomState(0).exponential(1000.0 / float(rate), size=len(rows)).tolist()
        arrivals = [0.0]
        for gap in gaps[:-1]:
            arrivals.append(arrivals[-1] + gap)
    else:
        arrivals = [0.0] * len(rows)
    requests = tuple(
        Request(
            id=str(r["request_id"]),
            prompt_tokens=max(1, r["tokens_in"]),
            max_output_tokens=max(1, r["tokens_out"]),
            arrival_ms=arrivals[i],
        )
        for i, r in enumerate(rows)
    )
    order = sorted(range(len(requests)), key=lambda i: (requests[i].arrival_ms, i))
    return ObservedRun(
        str(path.name), measured, _base_family(base), base, tuple(requests[i] for i in order), base_path
    )


@attrs.frozen
class IterationLog:
    """TensorRT-LLM iterations, each a measured step priced without a replay."""

    id: str
    measured: dict[str, float]
    family: str
    base_policy: Mapping[str, Any]
    #: per measured key: price_step's arguments
    steps: Mapping[str, tuple[int, int, int, int, int, int]]
    direct = True

    options = ObservedRun.options

    def predict(self, model: Any) -> dict[str, float]:
        return {key: model.price_step(*args) for key, args in self.steps.items()}

    def setup(self, factors: Mapping[str, Any] | None) -> PointSetup:  # pragma: no cover - never replayed
        raise Skip("iteration statistics are priced step by step, not replayed")


def looks_like_iterations(text: str) -> bool:
    return '"iterLatencyMS"' in text[:65536]


def read_iteration_log(path: Path, text: str, base: Mapping[str, Any], base_path: Path) -> IterationLog:
    options = (base.get("timing") or {}).get("options") or {}
    if not options.get("model") or not options.get("gpu"):
        raise InputError(
            base_path,
            f"iteration statistics ({path}) are priced for the base's model and GPU: "
            "its timing options must name both",
            json_path="$.timing.options",
        )
    if text.lstrip().startswith("["):
        try:
            items = loads(text)
        except (ValueError, RecursionError) as exc:
            raise json_error(path, exc) from None
    else:
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(loads(line))
                except (ValueError, RecursionError) as exc:  # located: line, column, JSON path
                    raise json_error(path, exc, first_line=number) from None
    measured: dict[str, float] = {}
    steps: dict[str, tuple[int, int, int, int, int, int]] = {}
    for n, it in enumerate(items):
        if not isinstance(it, dict):
            raise InputError(path, "expected an object per iteration", json_path=f"$[{n}]")
        latency = it.get("iterLatencyMS")
        ifb = it.get("inflightBatchingStats") or {}
        kv = it.get("kvCacheStats") or {}
        if not isinstance(latency, (int, float)) or latency <= 0 or not ifb:
            continue
        ctx_tokens = int(ifb.get("numCtxTokens", 0))
        ctx_reqs = int(ifb.get("numContextRequests", 0))
        gen = int(ifb.get("numGenRequests", 0))
        used = int(kv.get("usedNumBlocks", 0)) * int(kv.get("tokensPerBlock", 0))
        per_chunk = ctx_tokens // ctx_reqs if ctx_reqs else 0
        pairs = ctx_reqs * per_chunk * (per_chunk + 1) // 2
        key = f"iteration_{it.get('iter', n)}_ms"
        measured[key] = float(latency)
        steps[key] = (ctx_tokens, gen, max(0, used - ctx_tokens), ctx_reqs, pairs, 0)
    if not measured:
        raise InputError(path, "no iteration with an iterLatencyMS above 0 and inflightBatchingStats")
    return IterationLog(
        path.name, measured, _base_family(base) if base.get("scheduler") else "trtllm", base, steps
    )


def read_measurements(path: Path, base: Mapping[str, Any], base_path: Path) -> list[Any]:
    """The measurements in ``path``: measured points, TensorRT-LLM iteration
    statistics, or one benchmark client's run, told apart by their content."""
    from ..util.locations import read_text, rereadable
    from .points import read_points

    with rereadable(path, "a measurements file") as readable:  # a pipe: looked at, then read again
        text = read_text(readable)
        first = next((line for line in text.splitlines() if line.strip()), "")
        if looks_like_iterations(text):
            return [read_iteration_log(path, text, base, base_path)]
        if first.startswith("{") and '"measured"' in first:
            return list(read_points(readable))
        return [read_observed_run(readable, base, base_path)]
