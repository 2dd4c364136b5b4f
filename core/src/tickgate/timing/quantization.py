"""Weight and KV formats of a checkpoint, read from its ``config.json`` or ``hf_quant_config.json``.

The roofline needs two things from a quantized checkpoint: how many bytes a weight takes
(what a memory-bound step reads) and which tensor-core peak its matmuls run at (what a
compute-bound step reaches). :data:`WEIGHT_FORMATS` says both for each format engines load:

* ``fp8`` (per-tensor or per-channel scales) and ``fp8_block`` (DeepSeek's 128 x 128 block
  scales, one fp32 scale per block): one byte, the fp8 peak;
* ``nvfp4``: 4-bit values with one fp8 scale per 16 (NVIDIA's ModelOpt format): 0.5625 bytes,
  the fp4 peak on Blackwell; on a GPU without fp4 tensor cores the engines dequantize to 16
  bits (vLLM's Marlin NVFP4 kernel), so the bf16 peak;
* ``mxfp4``: 4-bit values with one e8m0 scale per 32 (OCP MX, gpt-oss): 0.53125 bytes; run as
  weight-only w4a16 (vLLM's and SGLang's default MoE path for it): the bf16 peak;
* ``int4`` (GPTQ / AWQ weight-only, group 128 with a 16-bit scale): 0.515625 bytes, bf16 peak.

An unknown ``quant_method`` or ``quant_algo`` is an error naming the file and the field, never a
silent 16 bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..util.errors import InputError

__all__ = ["WEIGHT_FORMATS", "compute_dtype", "quantization_from_configs", "weight_bytes"]

#: format -> (bytes per weight, the dtype whose tensor-core peak its matmuls run at)
WEIGHT_FORMATS: dict[str, tuple[float, str]] = {
    "bf16": (2.0, "bf16"),
    "fp16": (2.0, "fp16"),
    "fp8": (1.0, "fp8"),
    "fp8_block": (1.0 + 4 / (128 * 128), "fp8"),
    "nvfp4": (0.5 + 1 / 16, "fp4"),
    "mxfp4": (0.5 + 1 / 32, "bf16"),
    "int4": (0.5 + 2 / 128, "bf16"),
    "int8": (1.0, "int8"),
}


def weight_bytes(fmt: str) -> float:
    return WEIGHT_FORMATS[fmt][0]


def compute_dtype(fmt: str, has_peak: Any) -> str:
    """The peak a format's matmuls run at on a GPU (``has_peak(dtype)``: the GPU has a
    tensor-core peak for it); fp4 falls back to bf16 where the GPU has none."""
    dtype = WEIGHT_FORMATS[fmt][1]
    if dtype == "fp4" and not has_peak("fp4"):
        return "bf16"
    return dtype


def _attention_excluded(modules: Any) -> bool:
    """Whether a list of modules kept unquantized names the attention projections."""
    return isinstance(modules, list) and any(isinstance(m, str) and "self_attn" in m for m in modules)


def _error(file: Path | None, message: str, json_path: str) -> Exception:
    from ..util.errors import ConfigError

    if file is None:
        return ConfigError(f"{json_path}: {message}")
    return InputError(file, message, json_path=json_path)


def _from_quantization_config(qc: Mapping[str, Any], file: Path | None) -> dict[str, Any]:
    method = str(qc.get("quant_method", "")).lower()
    where = "$.quantization_config.quant_method"
    if method == "fp8":
        fmt = "fp8_block" if qc.get("weight_block_size") else "fp8"
    elif method == "mxfp4":
        fmt = "mxfp4"
    elif method in ("gptq", "awq", "gptq_marlin", "awq_marlin"):
        bits = qc.get("bits", qc.get("w_bit", 4))
        if bits not in (4, 8):
            raise _error(file, f"{method} with {bits} bits is not a format tickgate prices", where)
        fmt = "int4" if bits == 4 else "int8"
    elif method == "modelopt":
        return _from_modelopt(qc, file, "$.quantization_config")
    elif method == "compressed-tensors":
        fmt = _compressed_tensors(qc, file)
    else:
        raise _error(
            file,
            f"quant_method {qc.get('quant_method')!r} is not one tickgate knows "
            "(fp8, mxfp4, gptq, awq, modelopt, compressed-tensors)",
            where,
        )
    out: dict[str, Any] = {"gemm": fmt, "moe": fmt, "source": f"quantization_config {method}"}
    if fmt == "mxfp4":  # gpt-oss quantizes only the experts (its modules_to_not_convert)
        out["gemm"] = "bf16"
    elif _attention_excluded(qc.get("modules_to_not_convert") or qc.get("ignore")):
        out["attention"] = "bf16"
    return out


def _compressed_tensors(qc: Mapping[str, Any], file: Path | None) -> str:
    """The weights' format of a compressed-tensors checkpoint (its first config group)."""
    for group in (qc.get("config_groups") or {}).values():
        weights = group.get("weights") or {}
        bits, kind = weights.get("num_bits"), str(weights.get("type", "")).lower()
        if bits == 8 and kind == "float":
            return "fp8"
        if bits == 4 and kind == "float":
            return "nvfp4"
        if bits == 4 and kind == "int":
            return "int4"
        if bits == 8 and kind == "int":
            return "int8"
    raise _error(
        file,
        "compressed-tensors weights tickgate does not know (expected 8-bit float, 4-bit float or int)",
        "$.quantization_config.config_groups",
    )


_ALGOS = {
    "FP8": "fp8",
    "FP8_BLOCK_SCALES": "fp8_block",
    "NVFP4": "nvfp4",
    "W4A16_AWQ": "int4",
    "MXFP4": "mxfp4",
}


def _from_modelopt(q: Mapping[str, Any], file: Path | None, where: str) -> dict[str, Any]:
    algo = str(q.get("quant_algo", "")).upper()
    if algo not in _ALGOS:
        raise _error(
            file,
            f"quant_algo {q.get('quant_algo')!r} is not one tickgate knows ({', '.join(sorted(_ALGOS))})",
            f"{where}.quant_algo",
        )
    fmt = _ALGOS[algo]
    out: dict[str, Any] = {"gemm": fmt, "moe": fmt, "source": f"ModelOpt {algo}"}
    if _attention_excluded(q.get("exclude_modules")):
        out["attention"] = "bf16"
    kv = str(q.get("kv_cache_quant_algo") or "").upper()
    if kv == "FP8":
        out["kv_cache"] = "fp8"
    elif kv:
        raise _error(
            file,
            f"kv_cache_quant_algo {kv!r} is not one tickgate knows (FP8)",
            f"{where}.kv_cache_quant_algo",
        )
    return out


def quantization_from_configs(
    config: Mapping[str, Any],
    config_file: Path | None,
    hf_quant: Mapping[str, Any] | None,
    hf_quant_file: Path | None,
) -> dict[str, Any] | None:
    """The checkpoint's formats (:class:`~tickgate.timing.models.Quantization`'s fields) from
    ``hf_quant_config.json`` (NVIDIA's ModelOpt checkpoints), else ``quantization_config``;
    None for an unquantized checkpoint."""
    if hf_quant is not None:
        q = hf_quant.get("quantization")
        if not isinstance(q, Mapping):
            raise _error(hf_quant_file, "expected an object at 'quantization'", "$.quantization")
        return _from_modelopt(q, hf_quant_file, "$.quantization")
    qc = config.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise _error(config_file, "expected an object", "$.quantization_config")
    return _from_quantization_config(qc, config_file)
