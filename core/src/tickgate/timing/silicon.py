"""Measured deployments in aiconfigurator's silicon format, as closed-loop replays.

A row of the file (``silicon_sample.csv`` of ai-dynamo/aiconfigurator; its columns read as
that repository's ``tools/accuracy_regression_testing/predict_silicon_sample.py`` reads them)
is one deployment measured by a closed-loop benchmark: ``silicon_concurrency=N`` clients (in
``silicon_data_source``), each sending a request of exactly ``isl`` prompt and ``osl`` output
tokens as soon as its previous one finished, giving the mean TTFT and TPOT. This module turns
an aggregated row into a policy (the engine's scheduler with the row's per-rank batch cap, a
roofline timing model with the row's model, GPU, formats and layout) and that closed loop
(:mod:`.closed_loop`), or says why it cannot (a disaggregated row, a model with no config).

docs/timing.md, "Measured deployments: the silicon format", lists what each column becomes and what is assumed.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ..util.errors import ConfigError, InputError
from .closed_loop import closed_loop_requests
from .points import Origin, PointSetup, Skip
from .roofline import FACTORS, RooflineTiming

__all__ = ["SiliconRow", "read_silicon", "resolve_model"]

#: the columns a row must have (the file's header)
REQUIRED = (
    "id",
    "silicon_data_source",
    "backend",
    "model_path",
    "system",
    "mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)

#: backend -> (scheduler plugin, roofline engine family)
BACKENDS = {"vllm": ("vllm-v1", "vllm"), "sglang": ("sglang", "sglang"), "trtllm": ("trtllm", "trtllm")}

#: a row's quant mode -> the roofline's weight format
FORMATS = {"fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4", "bf16": "bf16", "fp16": "fp16"}
#: the ``precision`` column, where a quant mode is empty
PRECISIONS = {"fp8": "fp8", "fp4": "nvfp4", "bf16": "bf16", "fp16": "fp16"}


@attrs.frozen
class SiliconRow:
    """One row, with the interface :func:`tickgate.timing.check.check_points` replays."""

    id: str
    data: Mapping[str, str]
    line: int
    file: Path
    models: Path

    direct = False
    #: a deployment tickgate refuses (weights that do not fit) is a row skipped with why, not an
    #: error: the file is a collection of other people's measurements, not the user's policy
    refusals_skip = True

    @property
    def measured(self) -> dict[str, float]:
        out = {}
        for key, column in (("ttft_ms", "silicon_ttft_ms"), ("tpot_ms", "silicon_tpot_ms")):
            value = _float(self.data.get(column))
            if value is not None and value > 0:
                out[key] = value
        return out

    #: the check's figure for each measured key (the source's are means over the requests)
    figures: ClassVar[dict[str, str]] = {"ttft_ms": "ttft_ms_mean", "tpot_ms": "tpot_ms_mean"}

    @property
    def family(self) -> str | None:
        engine = BACKENDS.get(self.data.get("backend", ""))
        return engine[1] if engine else None

    @property
    def concurrency(self) -> int | None:
        """``silicon_concurrency=N`` of the row's source; where a source omits it (a few GB200
        rows), the ``_cN_`` its id carries, as the source's own ids name the concurrency."""
        m = re.search(r"silicon_concurrency=(\d+)", self.data.get("silicon_data_source", ""))
        m = m or re.search(r"_c(\d+)_", self.id)
        return int(m.group(1)) if m else None

    @property
    def partition(self) -> dict[str, str]:
        """What the error table groups by."""
        d = self.data
        precision = d.get("moe_quant_mode") or d.get("gemm_quant_mode") or d.get("precision") or "auto"
        return {
            "engine": d.get("backend", ""),
            "gpu": d.get("system", ""),
            "model": d.get("model_path", ""),
            "kind": "moe" if self._is_moe() else "dense",
            "precision": precision,
            "mode": d.get("mode", ""),
        }

    def _is_moe(self) -> bool:
        try:
            return bool(resolve_model(self.models, self.data.get("model_path", ""))[0])
        except Skip:
            return False

    def options(self, factors: Mapping[str, Any] | None) -> dict[str, Any]:
        return self._timing(factors)[0]

    def _timing(self, factors: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
        d = self.data
        engine = BACKENDS.get(d.get("backend", ""))
        if engine is None:
            raise Skip(f"backend {d.get('backend')!r} has no tickgate scheduler")
        if d.get("mode") != "agg":
            raise Skip(f"mode {d.get('mode')!r}: disaggregated rows are not replayed yet")
        config, assumed = resolve_model(self.models, d["model_path"])[1:]
        tp, dp = _size(d.get("tp_size")), _size(d.get("attention_dp_size"))
        moe_tp, moe_ep = _size(d.get("moe_tp_size"), 0), _size(d.get("moe_ep_size"), 0)
        options: dict[str, Any] = {
            "model": str(config),
            "gpu": d["system"],
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": _size(d.get("pp_size")),
            "attention_dp_size": dp,
            "engine": engine[1],
        }
        if moe_tp and moe_ep and moe_tp * moe_ep > tp * dp and moe_tp * moe_ep % dp == 0:
            assumed.append(
                f"tensor parallel {moe_tp * moe_ep // dp}: the row's moe_tp {moe_tp} x moe_ep {moe_ep} GPUs "
                f"over {dp} attention rank(s), not its tp_size {tp}"
            )
            tp = moe_tp * moe_ep // dp
            options["tensor_parallel_size"] = tp
        if moe_tp and moe_ep and moe_tp * moe_ep == tp * dp:
            options["moe_tensor_parallel_size"] = moe_tp
            options["moe_expert_parallel_size"] = moe_ep
        elif moe_tp or moe_ep:
            assumed.append(f"moe_tp {moe_tp} x moe_ep {moe_ep} is not tp x dp {tp * dp}: experts split by tp")
        gemm = FORMATS.get(d.get("gemm_quant_mode", "")) or PRECISIONS.get(d.get("precision", ""))
        moe = FORMATS.get(d.get("moe_quant_mode", "")) or gemm
        if gemm:
            options["dtype"] = gemm
        if moe:
            options["moe_dtype"] = moe
        if (gemm or "").startswith(("fp8", "nvfp4")):
            options["kv_cache_dtype"] = "fp8"
            assumed.append("fp8 KV cache with fp8/fp4 weights")
        if factors:
            options.update({k: v for k, v in factors.items() if k in FACTORS})
        return options, assumed

    def setup(self, factors: Mapping[str, Any] | None) -> PointSetup:
        d = self.data
        options, assumed = self._timing(factors)
        clients = self.concurrency
        if not clients:
            raise Skip("silicon_data_source names no silicon_concurrency")
        timing = _roofline(options)
        dp = timing.layout.dp
        per_rank = max(1, -(-clients // dp))
        batch = _size(d.get("batch_size"))
        tp = timing.layout.tp
        if per_rank > batch and tp > 1 and clients <= batch * tp * dp:
            # concurrency = batch_size x tp: each GPU is a rank with its own batch (attention DP)
            assumed.append(
                f"attention DP over the {tp} GPUs: concurrency {clients} is batch_size {batch} x tp"
            )
            options = {**options, "tensor_parallel_size": 1, "attention_dp_size": tp * dp}
            options.pop("moe_tensor_parallel_size", None)
            options.pop("moe_expert_parallel_size", None)
            timing = _roofline(options)
            dp = timing.layout.dp
            per_rank = max(1, -(-clients // dp))
        if per_rank > batch:
            assumed.append(f"batch cap {per_rank}, the clients per rank (the row's batch_size is {batch})")
            batch = per_rank
        scheduler = _scheduler(BACKENDS[d["backend"]][0], batch, per_rank)
        isl, osl = _size(d.get("isl")), _size(d.get("osl"))
        spread = SPREAD * _solo_ms(timing, isl, osl)
        requests, warmup = closed_loop_requests(per_rank, isl, osl, seed=_seed(self.id), spread_ms=spread)
        if dp > 1:
            assumed.append(
                f"one of {dp} attention-DP ranks replayed with {per_rank} of the {clients} clients"
            )
        policy = {
            "version": 1,
            "scheduler": scheduler,
            "timing": {"name": "roofline", "options": options},
            "limits": {"max_ticks": 50_000_000},
        }
        origin = Origin(self.file, f"row {self.id!r}", self.line)
        return PointSetup(policy, requests, tuple(assumed), origin, max_concurrency=per_rank, warmup=warmup)


#: the share of a lone request's duration the clients' first requests spread over
SPREAD = 0.9


def _solo_ms(timing: RooflineTiming, isl: int, osl: int) -> float:
    """A request's duration alone on the engine (its prefill, then ``osl`` decode steps of
    one sequence): no client's first request can finish sooner, so starts spread within it
    keep every client's requests in order."""
    return timing.step_ms(isl, 0, 0) + osl * timing.step_ms(0, 1, isl + osl // 2)


def _roofline(options: dict[str, Any]) -> RooflineTiming:
    """The row's timing model; a layout or format it cannot price skips the row, saying why."""
    try:
        return RooflineTiming(options)
    except ConfigError as exc:
        raise Skip(f"timing: {exc}") from None


def _seed(text: str) -> int:
    """A seed from the row's id (stable across processes, unlike ``hash``)."""
    import zlib

    return zlib.crc32(text.encode("utf-8"))


def _scheduler(name: str, batch: int, clients: int) -> dict[str, Any]:
    """The engine's scheduler with the row's per-rank batch cap; every other setting is the
    engine's default for the measured versions (docs/timing.md)."""
    cap = max(batch, 1)
    if name == "trtllm":
        options: dict[str, Any] = {
            "tokens_per_block": 32,
            "kv_cache_max_tokens": "auto",
            "kv_cache_free_gpu_mem_fraction": 0.9,
            "max_batch_size": cap,
            "max_num_tokens": 8192,
            "capacity_scheduler_policy": "GUARANTEED_NO_EVICT",
            "enable_chunked_context": True,
        }
    elif name == "sglang":
        options = {"max_total_tokens": "auto", "max_running_requests": cap, "chunked_prefill_size": 8192}
    else:
        options = {
            "block_size": 16,
            "num_gpu_blocks": "auto",
            "gpu_memory_utilization": 0.9,
            "max_num_seqs": cap,
            "max_num_batched_tokens": 8192,
        }
    return {"name": name, "options": options}


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def _size(text: str | None, default: int = 1) -> int:
    """A layout or length column: a positive integer, else ``default`` (empty or 0: unset)."""
    try:
        value = int(float(text)) if text not in (None, "") else 0
    except ValueError:
        return default
    return value if value > 0 else default


def resolve_model(models: Path, model_path: str) -> tuple[bool, Path, list[str]]:
    """``org/name`` as ``MODELS/org--name_config.json``; failing that the same checkpoint under
    the names its publisher also uses (``meta-llama/Llama-3.1-8B`` is published as
    ``Meta-Llama-3.1-8B``; an ``-Instruct`` tune and a ``-FP8`` / ``-NVFP4`` export share the base
    model's architecture, the row's quant columns giving the formats). Returns whether the model
    is MoE, the config path and what was assumed; :class:`Skip` when none is there."""
    org, _, name = model_path.partition("/")
    tried = []
    for candidate, note in _candidates(org, name):
        path = models / f"{candidate}_config.json"
        tried.append(path.name)
        if path.is_file():
            assumed = [f"model config {path.name} for {model_path}"] if note else []
            return _moe(path), path, assumed
    raise Skip(f"model {model_path!r}: no config in {models} (tried {', '.join(tried)})")


def _candidates(org: str, name: str) -> list[tuple[str, bool]]:
    names = [name]
    base = re.sub(r"-(FP8|NVFP4|FP4|MXFP4)$", "", name, flags=re.IGNORECASE)
    for variant in (base, re.sub(r"-Instruct$", "", base)):
        if variant not in names:
            names.append(variant)
    for variant in list(names):
        if variant.startswith("Llama-"):
            names.append("Meta-" + variant)
    orgs = [org] + (["meta-llama"] if org == "nvidia" and "Llama" in name else [])
    orgs += ["deepseek-ai"] if org == "nvidia" and "DeepSeek" in name else []
    orgs += ["Qwen"] if org == "nvidia" and "Qwen" in name else []
    out = []
    for o in orgs:
        for n in names:
            key = f"{o}--{n}"
            if (key, False) not in out and (key, True) not in out:
                out.append((key, (o, n) != (org, name)))
    return out


def _moe(path: Path) -> bool:
    import json

    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    inner = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    merged = {**config, **inner}
    return any(merged.get(k) for k in ("num_local_experts", "num_experts", "n_routed_experts"))


def read_silicon(path: Path, models: Path) -> list[SiliconRow]:
    """The rows of a silicon CSV; a file without the columns, or a row whose measurement is not
    a positive number, is an error naming the file, the line and the column."""
    if not models.is_dir():
        raise InputError(models, "expected a directory of model configs (ORG--NAME_config.json)")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start}): expected a CSV file") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(path, f"not a silicon CSV: no column {', '.join(missing)} in the header", line=1)
    rows = []
    seen: dict[str, int] = {}
    for record in reader:
        line = reader.line_num
        if None in record:
            raise InputError(path, f"more fields than the header's {len(reader.fieldnames or ())}", line=line)
        for column in ("silicon_ttft_ms", "silicon_tpot_ms"):
            value = _float(record.get(column))
            if record.get(column) and (value is None or not value > 0 or value == float("inf")):
                raise InputError(
                    path, f"column {column}: expected a positive number, not {record[column]!r}", line=line
                )
        row_id = record["id"]
        if row_id in seen:
            raise InputError(path, f"id {row_id!r} repeats the row on line {seen[row_id]}", line=line)
        seen[row_id] = line
        rows.append(SiliconRow(row_id, record, line, path, models))
    return rows
