"""Measured points (``realdata/measured/points.jsonl``'s format) as replays.

A point says what ran (``engine``, ``engine_version``, ``engine_flags``), on
what (``model_key``, ``gpu_key``, ``tp``, ``dtype``, ``kv_cache_dtype``), under
what traffic (``workload``) and what was measured (``measured``). This module
turns one into a policy (scheduler from the engine and its flags, a roofline
timing model from the model and GPU, the KV pool ``auto``: from memory) and a list of
requests, or says why it cannot (a dataset tickgate does not have).
docs/timing.md, "Checking against measurements", tabulates the mapping.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..interfaces.model import Request
from ..util.errors import ConfigError, InputError
from ..util.jsonio import loads
from ..util.locations import json_error
from .roofline import FACTORS, RooflineTiming

__all__ = ["MEASURED_KEYS", "Origin", "Point", "PointSetup", "Skip", "read_points", "setup_point"]

#: the ``measured`` keys a replay predicts, in the order tables show them
MEASURED_KEYS = (
    "output_tok_s",
    "request_s",
    "total_tok_s",
    "ttft_ms_mean",
    "ttft_ms_median",
    "ttft_ms_p99",
    "tpot_ms_mean",
    "tpot_ms_median",
    "tpot_ms_p99",
    "itl_ms_mean",
    "itl_ms_median",
    "itl_ms_p99",
    "e2e_ms_mean",
    "e2e_ms_median",
    "e2e_ms_p99",
    "first_token_latency_ms",
)

#: engine name in a point -> (scheduler plugin, roofline engine family)
ENGINES = {"vllm": ("vllm-v1", "vllm"), "sglang": ("sglang", "sglang"), "tensorrt-llm": ("trtllm", "trtllm")}


class Skip(Exception):
    """A point tickgate cannot replay, and why (the check lists it as skipped)."""


@attrs.frozen
class Point:
    id: str
    data: Mapping[str, Any]
    line: int
    #: the points file (errors about the point name it and the line)
    file: Path | None = None

    #: replayed (a measurement priced without a replay sets this)
    direct = False

    @property
    def measured(self) -> dict[str, float]:
        m = self.data.get("measured") or {}
        return {k: float(m[k]) for k in MEASURED_KEYS if isinstance(m.get(k), (int, float))}

    @property
    def family(self) -> str | None:
        """The roofline engine family (None: no tickgate scheduler)."""
        engine = ENGINES.get(str(self.data.get("engine")))
        return engine[1] if engine else None

    def options(self, factors: Mapping[str, Any] | None) -> dict[str, Any]:
        return timing_options(self, overrides=factors)

    def setup(self, factors: Mapping[str, Any] | None) -> PointSetup:
        return setup_point(self, factors=factors)


@attrs.frozen
class Origin:
    """Where the values of a policy tickgate writes for a replay come from. The policy is
    loaded from a temporary file, gone by the time anyone reads an error about it: the
    error names the user's file instead, at the JSON path the refused value came from."""

    #: the user's file (a points file, the base policy of a benchmark run)
    file: Path
    #: what the policy was made from, for an error no path maps: ``point 'x'``
    what: str
    #: the line of a point in a JSON lines file (None: looked up in ``file``)
    line: int | None = None
    #: the policy's JSON paths -> the file's (a path maps everything under it)
    paths: Mapping[str, str] = attrs.field(factory=dict)

    def mapped(self, policy_path: str) -> str | None:
        for prefix in sorted(self.paths, key=len, reverse=True):
            if policy_path == prefix or policy_path.startswith((prefix + ".", prefix + "[")):
                return self.paths[prefix] + policy_path[len(prefix) :]
        return None

    def error(self, message: str, json_path: str | None = None) -> InputError:
        """An error about the policy written for the replay (at ``json_path`` in it), about
        the user's file: at the path the value came from, else naming what was replayed."""
        mapped = self.mapped(json_path) if json_path else None
        if mapped is None:
            where = f" ({json_path} of the policy tickgate replays it with)" if json_path else ""
            return InputError(self.file, f"{self.what}{where}: {message}", line=self.line)
        line, column = self.line, None
        if line is None:
            line, column = self._locate(mapped)
        return InputError(self.file, message, line=line, column=column, json_path=mapped)

    def _locate(self, json_path: str) -> tuple[int | None, int | None]:
        from ..util.locations import load_yaml

        try:
            _, locations = load_yaml(self.file)
        except InputError:
            return None, None
        probe = json_path
        while probe not in locations and len(probe) > 1:
            probe = probe[: max(probe.rfind("."), probe.rfind("["), 1)]
        return locations.get(probe, (None, None))


#: a point's fields -> where setup_point puts them in the policy it replays the point with
POINT_PATHS = {
    "$.timing.options.model": "$.model_key",
    "$.timing.options.gpu": "$.gpu_key",
    "$.timing.options.tensor_parallel_size": "$.tp",
    "$.scheduler.options.gpu_memory_utilization": "$.engine_flags.gpu_memory_utilization",
    "$.scheduler.options.max_model_len": "$.engine_flags.max_model_len",
    "$.scheduler.options.mem_fraction_static": "$.engine_flags.mem_fraction_static",
}


@attrs.frozen
class PointSetup:
    """What replays a point: the policy document and the requests."""

    policy: dict[str, Any]
    requests: list[Request]
    #: the settings tickgate assumed where the point is silent, for the table's notes
    assumed: tuple[str, ...] = ()
    #: where the policy's values come from (errors name it; None: the policy as written)
    origin: Origin | None = None
    #: closed-loop clients (None: requests sent at their arrival times)
    max_concurrency: int | None = None
    #: the leading requests whose figures are left out (a benchmark's warm-up)
    warmup: int = 0


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (a measurement is finite, or null when not given)")


def _strict_json(text: str) -> Any:
    """``json.loads`` without the NaN / Infinity extension it accepts by default."""
    return json.loads(text, parse_constant=_not_a_number)


def read_points(path: Path) -> list[Point]:
    """The points of a JSONL file, each checked against
    ``schemas/timing-points.schema.json`` (finite positive measurements, positive lengths and
    counts, integer layouts); a line that is not such a point is an error naming the file, the
    line and the JSON path."""
    from ..util.schemas import load_schema, validate

    schema = load_schema("timing-points.schema.json")
    points = []
    try:
        text = path.read_bytes().decode("utf-8-sig")  # a leading byte order mark dropped
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            path, f"not UTF-8 text (byte {exc.start}): expected JSON lines, not a binary or compressed file"
        ) from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = loads(line, _strict_json)
        except (ValueError, RecursionError) as exc:  # located: line, column, JSON path
            raise json_error(path, exc, first_line=number) from None
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise InputError(path, "expected a JSON object with a string 'id'", line=number)
        for key in ("workload", "measured"):
            if not isinstance(data.get(key), dict):
                raise InputError(path, f"expected an object at '{key}'", line=number, json_path=f"$.{key}")
        validate(data, schema, file=path, line=number)
        points.append(Point(data["id"], data, number, path))
    return points


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dtype(value: Any, default: str) -> str:
    text = str(value or "").lower()
    for name in ("fp8", "fp16", "bf16"):
        if text.startswith(name):
            return name
    return default


def timing_options(point: Point, *, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The roofline options of a point: ``model_key``, ``gpu_key``, ``tp``,
    ``dtype`` and ``kv_cache_dtype`` (``auto``: the weights' 16-bit type), the
    engine family's defaults, then the factors among ``overrides`` (a fitted file's)."""
    d = point.data
    engine = ENGINES.get(str(d.get("engine")))
    if engine is None:
        raise Skip(f"engine {d.get('engine')!r} has no tickgate scheduler")
    dtype = _dtype(d.get("dtype"), "bf16")
    kv = _dtype(d.get("kv_cache_dtype"), "auto")
    options: dict[str, Any] = {
        "model": d.get("model_key"),
        "gpu": d.get("gpu_key"),
        "dtype": dtype,
        "kv_cache_dtype": kv if kv != "auto" else "auto",
        "tensor_parallel_size": _int(d.get("tp")) or 1,
        "engine": engine[1],
    }
    if overrides:
        options.update({k: v for k, v in overrides.items() if k in FACTORS})
    return options


def setup_point(point: Point, *, factors: Mapping[str, Any] | None = None) -> PointSetup:
    """The policy and requests that replay ``point`` (raises :class:`Skip`)."""
    d = point.data
    w = d["workload"]
    engine = ENGINES.get(str(d.get("engine")))
    if engine is None:
        raise Skip(f"engine {d.get('engine')!r} has no tickgate scheduler")
    isl, osl, n = _int(w.get("isl")), _int(w.get("osl")), _int(w.get("num_requests"))
    if isl is None or osl is None:
        raise Skip(
            f"workload {w.get('dataset')!r}: prompt and output lengths come from a dataset tickgate "
            "does not ship (no isl/osl)"
        )
    if not n:
        raise Skip("workload: no num_requests")
    options = timing_options(point, overrides=factors)
    try:
        timing = RooflineTiming(options)
    except ConfigError as exc:
        raise Skip(f"timing: {exc}") from None
    scheduler, assumed = _scheduler(point, engine[0], timing, isl, osl)
    requests = _requests(point, isl, osl, n)
    policy = {
        "version": 1,
        "scheduler": scheduler,
        "timing": {"name": "roofline", "options": options},
        "limits": {"max_ticks": 50_000_000},
    }
    origin = None
    if point.file is not None:
        origin = Origin(point.file, f"point {point.id!r}", point.line, POINT_PATHS)
    # closed-loop clients as the benchmark ran them (a static batch is its own limit)
    clients = None if _int(w.get("batch_size")) else _int(w.get("max_concurrency"))
    return PointSetup(policy, requests, tuple(assumed), origin, max_concurrency=clients)


# -- workloads -----------------------------------------------------------------


def _requests(point: Point, isl: int, osl: int, n: int) -> list[Request]:
    """Fixed lengths, or as ``sglang.bench_serving``'s random dataset draws them
    with ``random_range_ratio`` r (numpy's legacy generator, bench_serving's
    default seed 1: input lengths uniform in [max(L r, 1), L], then output
    lengths in [L r, L]; the S1 points' recorded token totals are reproduced
    exactly); all at
    t = 0 offline, else Poisson arrivals at the point's rate."""
    import numpy as np

    w = point.data["workload"]
    ratio = w.get("random_range_ratio")
    seed = _int(w.get("seed"))
    if isinstance(ratio, (int, float)) and "uniform" in str(w.get("length_distribution", "")):
        rng = np.random.RandomState(1 if seed is None else seed)
        inputs = rng.randint(max(int(isl * ratio), 1), isl + 1, size=n).tolist()
        # its output lengths may be 0 (randint from int(L * ratio)); a request
        # here decodes at least the first token
        outputs = [max(1, k) for k in rng.randint(int(osl * ratio), osl + 1, size=n).tolist()]
    else:
        inputs, outputs = [isl] * n, [osl] * n
    rate = w.get("request_rate")
    if w.get("offline") or rate in (None, "inf") or not isinstance(rate, (int, float)):
        arrivals = [0.0] * n
    else:
        # Poisson arrivals as vllm bench serve / sglang.bench_serving draw them:
        # exponential gaps of mean 1 / rate, the first request at t = 0
        rng = np.random.RandomState(0 if seed is None else seed)
        gaps = rng.exponential(1.0 / float(rate), size=n) * 1000.0
        arrivals = [0.0]
        for gap in gaps[:-1].tolist():
            arrivals.append(arrivals[-1] + gap)
    return [
        Request(
            id=f"r{i}",
            prompt_tokens=int(inputs[i]),
            max_output_tokens=int(outputs[i]),
            arrival_ms=float(arrivals[i]),
        )
        for i in range(n)
    ]


# -- schedulers ----------------------------------------------------------------


def _scheduler(
    point: Point, name: str, timing: RooflineTiming, isl: int, osl: int
) -> tuple[dict[str, Any], list[str]]:
    d = point.data
    flags = d.get("engine_flags") or {}
    w = d["workload"]
    batch = _int(w.get("batch_size"))
    if name == "trtllm":
        return _trtllm(timing, isl, osl, batch, flags)
    if name == "sglang":
        return _sglang(timing, flags)
    return _vllm(timing, flags)


def _round_up(value: float, step: int) -> int:
    return step * math.ceil(value / step)


def trtllm_bench_settings(timing: RooflineTiming, isl: int, osl: int) -> tuple[int, int]:
    """``max_batch_size`` and ``max_num_tokens`` as ``trtllm-bench build`` picks them
    from the dataset (``tensorrt_llm/bench/build/tuning.py``: ``calc_engine_setting``
    then ``finetune_setting``): the requests whose KV fits in 95 % of the memory
    left after the engine, capped at 4096, rounded up to the sizes it uses."""
    m = timing.model
    gib = 1024**3
    kv_bytes = 1 if timing.kv_cache_dtype == "fp8" else 2
    weight_bytes = 1 if timing.dtype == "fp8" else 2
    per_token = 2 * m.num_layers * max(timing.tp, m.num_kv_heads) * m.head_dim * kv_bytes / gib
    engine = m.weight_params * weight_bytes / gib
    available = timing.gpu_memory_bytes / gib * timing.tp - engine
    requests = available * 0.95 / (per_token * (isl + osl))
    raw_bs = min(requests, 4096)
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        batch = max(64, _round_up(raw_bs, 32))
    elif raw_bs < 1024:
        batch = _round_up(raw_bs, 128)
    else:
        batch = _round_up(raw_bs, 256)
    if raw_tok < 4096:
        tokens = max(2048, _round_up(raw_tok, 256))
    elif raw_tok < 8192:
        tokens = _round_up(raw_tok, 512)
    else:
        tokens = _round_up(raw_tok, 1024)
    return batch, tokens


def _trtllm(
    timing: RooflineTiming, isl: int, osl: int, batch: int | None, flags: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    backend = str(flags.get("backend", ""))
    chunked = False
    if batch:
        # gptSessionBenchmark: a static batch of B requests run to completion
        max_batch_size, max_num_tokens, fraction = batch, max(8192, batch * isl), 0.9
        assumed = [f"static batch of {batch}"]
    elif "trtllm-bench" in backend or "trtllm-bench" in str(flags.get("build", "")):
        max_batch_size, max_num_tokens = trtllm_bench_settings(timing, isl, osl)
        fraction, chunked = 0.95, True
        assumed = [
            f"trtllm-bench build: max_batch_size {max_batch_size}, max_num_tokens {max_num_tokens}; "
            "kv_cache_free_gpu_mem_fraction 0.95; chunked context on"
        ]
    else:
        # Triton's tensorrtllm_backend: the engine's trtllm-build defaults
        max_batch_size, max_num_tokens, fraction = 2048, 8192, 0.9
        assumed = [
            "trtllm-build defaults: max_batch_size 2048, max_num_tokens 8192; "
            "kv_cache_free_gpu_mem_fraction 0.9; chunked context off"
        ]
    options = {
        "tokens_per_block": 64,
        "kv_cache_max_tokens": "auto",
        "kv_cache_free_gpu_mem_fraction": fraction,
        "max_batch_size": max_batch_size,
        "max_num_tokens": max_num_tokens,
        "capacity_scheduler_policy": "GUARANTEED_NO_EVICT",
        "enable_chunked_context": chunked,
    }
    return {"name": "trtllm", "options": options}, assumed


def _number(flags: Mapping[str, Any], key: str, default: float) -> float:
    value = flags.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _sglang(timing: RooflineTiming, flags: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``max_total_tokens: auto``: the pool, ``context_length`` and ``max_running_requests``
    as SGLang derives them (the scheduler's own defaults, tp from the timing model)."""
    launch = str(flags.get("launch", ""))
    options: dict[str, Any] = {
        "max_total_tokens": "auto",
        "disable_radix_cache": flags.get("radix_cache") is False or "--disable-radix-cache" in launch,
    }
    for key in ("max_running_requests", "chunked_prefill_size"):
        if _int(flags.get(key)):
            options[key] = flags[key]
    fraction = _number(flags, "mem_fraction_static", 0.0)
    if fraction:
        options["mem_fraction_static"] = fraction
        return {"name": "sglang", "options": options}, []
    return {"name": "sglang", "options": options}, [
        f"mem_fraction_static: SGLang's default at tp {timing.tp}"
    ]


def _vllm(timing: RooflineTiming, flags: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The point's ``max_num_seqs`` and ``max_num_batched_tokens`` where it gives them as
    numbers; vLLM V1's defaults for its OpenAI server on a data-centre GPU otherwise."""
    util = _number(flags, "gpu_memory_utilization", 0.9)
    block_size = 16
    seqs = _int(flags.get("max_num_seqs")) or 1024
    batched = _int(flags.get("max_num_batched_tokens")) or 8192
    options: dict[str, Any] = {
        "block_size": block_size,
        "num_gpu_blocks": "auto",
        "gpu_memory_utilization": util,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": batched,
    }
    max_model_len = _int(flags.get("max_model_len"))
    if max_model_len:
        options["max_model_len"] = max_model_len
    given = [k for k in ("max_num_seqs", "max_num_batched_tokens") if _int(flags.get(k))]
    assumed = [] if len(given) == 2 else [f"max_num_seqs {seqs}, max_num_batched_tokens {batched}"]
    return {"name": "vllm-v1", "options": options}, assumed


def family(point: Any) -> str | None:
    """The roofline engine family of a measurement (None: no tickgate scheduler)."""
    return point.family
