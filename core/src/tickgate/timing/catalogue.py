"""The models and GPUs a roofline timing model can be built from.

``catalogue.json`` ships with the package: it is the facts file of
``realdata/measured/models_hardware.json`` (every model config and GPU peak,
each with the URL it was read from), so a policy can say ``model:
llama-3.1-70b`` or ``model: meta-llama/Llama-3.3-70B-Instruct`` and ``gpu:
H100-SXM-80GB`` (or an alias such as ``H100-80GB-unspecified``). A model can
also be a path to a Hugging Face ``config.json`` (the fields every decoder
config carries, plus the MoE fields of Mixtral, Qwen-MoE and DeepSeek configs),
and a GPU a mapping of its figures. Names are matched exactly or, failing that,
case-insensitively; an unknown name is a :class:`~tickgate.util.errors.ConfigError`
listing the known ones.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import ConfigError
from ..util.locations import parse_json

__all__ = ["GpuSpec", "ModelSpec", "catalogue", "lookup_gpu", "lookup_model", "model_from_hf_config"]

#: bytes per element of the dtypes a policy may name
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "int8": 1}
#: PCIe bandwidth per direction (GB/s, x16) where a GPU's record names only the generation
_PCIE_GBPS = {"gen3": 16.0, "gen4": 32.0, "gen5": 64.0, "gen6": 128.0}


@attrs.frozen
class ModelSpec:
    """A decoder-only transformer's shape: what its steps compute and move.

    ``num_experts`` > 0 makes the MLP a mixture of experts: each token runs
    ``experts_per_token`` experts of ``moe_intermediate_size`` (plus a shared
    expert of ``shared_intermediate_size`` when the model has one) in every
    layer from ``first_moe_layer`` on; the layers before it are dense.
    """

    key: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = None
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_intermediate_size: int = 0
    first_moe_layer: int = 0
    source: str = ""

    @property
    def attention_params(self) -> int:
        """q, k, v and o projections of one layer (no biases)."""
        h, d = self.hidden_size, self.head_dim
        return h * self.num_attention_heads * d * 2 + h * self.num_kv_heads * d * 2

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.first_moe_layer if self.num_experts else 0

    @property
    def dense_layers(self) -> int:
        return self.num_layers - self.moe_layers

    @property
    def expert_params(self) -> int:
        """One expert: gate, up and down projections (SwiGLU, three matrices)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def shared_params(self) -> int:
        return 3 * self.hidden_size * self.shared_intermediate_size

    @property
    def active_params(self) -> int:
        """Matmul weights one token multiplies through, all layers, without the
        embedding and the LM head (MoE: the routed experts it runs, the shared
        expert and the router)."""
        dense_mlp = 3 * self.hidden_size * self.intermediate_size
        moe_mlp = (
            self.experts_per_token * self.expert_params
            + self.shared_params
            + self.hidden_size * self.num_experts
        )
        return (
            self.num_layers * self.attention_params
            + self.dense_layers * dense_mlp
            + self.moe_layers * moe_mlp
        )

    @property
    def weight_params(self) -> int:
        """Every weight the GPUs hold: all experts, embedding and LM head (once if tied)."""
        dense_mlp = 3 * self.hidden_size * self.intermediate_size
        moe_mlp = (
            self.num_experts * self.expert_params + self.shared_params + self.hidden_size * self.num_experts
        )
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        norms = (2 * self.num_layers + 1) * self.hidden_size
        return (
            self.num_layers * self.attention_params
            + self.dense_layers * dense_mlp
            + self.moe_layers * moe_mlp
            + embed
            + norms
        )

    def kv_bytes_per_token(self, element_bytes: int) -> int:
        """K and V of one token over all layers (all KV heads)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * element_bytes


@attrs.frozen
class GpuSpec:
    """One GPU's peaks: dense tensor-core TFLOPS per dtype, memory and links."""

    key: str
    tflops: Mapping[str, float | None]
    memory_gb: float
    hbm_bandwidth_gbps: float
    #: NVLink bandwidth per direction (GB/s); None without NVLink
    nvlink_gbps: float | None
    #: PCIe bandwidth per direction (GB/s)
    pcie_gbps: float
    source: str = ""

    def peak_tflops(self, dtype: str) -> float:
        value = self.tflops.get(dtype)
        if not value:
            raise ConfigError(
                f"GPU {self.key!r} has no {dtype} tensor-core peak "
                f"(known: {', '.join(k for k, v in sorted(self.tflops.items()) if v)})"
            )
        return float(value)

    @property
    def link_gbps(self) -> float:
        """Per-direction bandwidth between tensor-parallel peers: NVLink, else PCIe."""
        return self.nvlink_gbps if self.nvlink_gbps else self.pcie_gbps


@functools.cache
def catalogue() -> dict[str, Any]:
    """The shipped facts (``catalogue.json``), parsed once."""
    text = resources.files(__package__).joinpath("catalogue.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _find(name: str, table: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    if name in table:
        return name
    if name in names:
        return names[name]
    folded = {k.casefold(): v for k, v in [*((k, k) for k in table), *names.items()]}
    return folded.get(name.casefold())


def lookup_model(value: str, *, base: Path | None = None) -> ModelSpec:
    """A model by catalogue key, by a name in an entry's ``applies_to``, or from
    a Hugging Face ``config.json`` (a path ending in ``.json``, or a directory
    holding one; relative to ``base``)."""
    models = catalogue()["models"]
    names = {alias: key for key, entry in models.items() for alias in entry.get("applies_to", ())}
    key = _find(value, models, names)
    if key is not None:
        return _catalogue_model(key, models[key])
    path = Path(value)
    if base is not None and not path.is_absolute():
        path = base / path
    if path.is_dir():
        path = path / "config.json"
    if value.endswith(".json") or path.is_file():
        try:
            text = path.read_text(encoding="utf-8-sig")  # a leading byte order mark dropped
        except OSError as exc:
            raise ConfigError(f"model {value!r}: cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ConfigError(f"model {value!r}: {path} is not JSON: {exc}") from None
        config = parse_json(text, path)  # strict, no member twice: errors located in the file
        return model_from_hf_config(config, key=str(value))
    known = sorted({*models, *names})
    raise ConfigError(
        f"unknown model {value!r}: not in the catalogue and not a config.json path "
        f"(known: {', '.join(known)})"
    )


def _catalogue_model(key: str, entry: Mapping[str, Any]) -> ModelSpec:
    moe = entry.get("moe") or {}
    return ModelSpec(
        key=key,
        num_layers=entry["num_layers"],
        hidden_size=entry["hidden_size"],
        num_attention_heads=entry["num_attention_heads"],
        num_kv_heads=entry["num_kv_heads"],
        head_dim=entry["head_dim"],
        intermediate_size=entry["intermediate_size"],
        vocab_size=entry["vocab_size"],
        tie_word_embeddings=bool(entry.get("tie_word_embeddings")),
        max_position_embeddings=entry.get("max_position_embeddings"),
        num_experts=moe.get("num_experts", 0),
        experts_per_token=moe.get("experts_per_token", 0),
        moe_intermediate_size=moe.get("moe_intermediate_size", entry["intermediate_size"] if moe else 0),
        shared_intermediate_size=moe.get("shared_intermediate_size", 0),
        first_moe_layer=moe.get("first_moe_layer", 0),
        source=(entry.get("source") or {}).get("url", ""),
    )


def _int(config: Mapping[str, Any], *names: str, default: int | None = None) -> int:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    if default is not None:
        return default
    raise ConfigError(f"config.json has no integer {' / '.join(names)}")


def model_from_hf_config(config: Mapping[str, Any], *, key: str = "config.json") -> ModelSpec:
    """A model from a Hugging Face ``config.json``: the decoder fields
    (``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads``, ``head_dim``, ``intermediate_size``,
    ``vocab_size``) and the MoE fields of Mixtral (``num_local_experts``),
    Qwen-MoE (``num_experts``, ``moe_intermediate_size``,
    ``shared_expert_intermediate_size``) and DeepSeek (``n_routed_experts``,
    ``n_shared_experts``, ``first_k_dense_replace``). Multimodal configs keep
    the language model under ``text_config``."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"model {key!r}: config.json is not an object")
    if isinstance(config.get("text_config"), Mapping):
        config = {**config, **config["text_config"]}
    try:
        hidden = _int(config, "hidden_size", "n_embd", "d_model")
        heads = _int(config, "num_attention_heads", "n_head")
        experts = _int(config, "num_local_experts", "num_experts", "n_routed_experts", default=0)
        moe_inter = _int(config, "moe_intermediate_size", default=0)
        shared = _int(config, "shared_expert_intermediate_size", default=0)
        if not shared and config.get("n_shared_experts"):
            shared = _int(config, "n_shared_experts") * moe_inter
        inter = _int(config, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
        return ModelSpec(
            key=key,
            num_layers=_int(config, "num_hidden_layers", "n_layer", "num_layers"),
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=_int(config, "num_key_value_heads", default=heads),
            head_dim=_int(config, "head_dim", default=hidden // heads),
            intermediate_size=inter,
            vocab_size=_int(config, "vocab_size"),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            max_position_embeddings=config.get("max_position_embeddings"),
            num_experts=experts,
            experts_per_token=_int(config, "num_experts_per_tok", default=2 if experts else 0),
            moe_intermediate_size=(moe_inter or inter) if experts else 0,
            shared_intermediate_size=shared,
            first_moe_layer=_int(config, "first_k_dense_replace", default=0) if experts else 0,
            source=key,
        )
    except ConfigError as exc:
        raise ConfigError(f"model {key!r}: {exc}") from None


def lookup_gpu(value: str | Mapping[str, Any]) -> GpuSpec:
    """A GPU by catalogue key or alias, or from a mapping of its figures (the
    catalogue's field names: ``bf16_dense_tflops``, ``fp8_dense_tflops``,
    ``memory_gb``, ``hbm_bandwidth_GBps``, ``nvlink_bandwidth_GBps``)."""
    data = catalogue()
    gpus, aliases = data["gpus"], {k: v["assume"] for k, v in data.get("gpu_aliases", {}).items()}
    if isinstance(value, Mapping):
        return _gpu("gpu", value)
    key = _find(value, gpus, aliases)
    if key is None:
        raise ConfigError(
            f"unknown GPU {value!r} (known: {', '.join(sorted({*gpus, *aliases}))}; "
            "or give its figures as a mapping)"
        )
    return _gpu(key, gpus[key])


def _gpu(key: str, entry: Mapping[str, Any]) -> GpuSpec:
    for need in ("memory_gb", "hbm_bandwidth_GBps"):
        if not isinstance(entry.get(need), (int, float)):
            raise ConfigError(f"GPU {key!r}: {need} must be a number")
    tflops = {dtype: entry.get(f"{dtype}_dense_tflops") for dtype in ("bf16", "fp16", "fp8", "int8")}
    if not tflops["bf16"] and not tflops["fp16"]:
        raise ConfigError(f"GPU {key!r}: bf16_dense_tflops (or fp16_dense_tflops) must be a number")
    tflops["bf16"] = tflops["bf16"] or tflops["fp16"]
    tflops["fp16"] = tflops["fp16"] or tflops["bf16"]
    nvlink = entry.get("nvlink_bandwidth_GBps")
    return GpuSpec(
        key=key,
        tflops=tflops,
        memory_gb=float(entry["memory_gb"]),
        hbm_bandwidth_gbps=float(entry["hbm_bandwidth_GBps"]),
        # the catalogue's NVLink figures are bidirectional totals (its notes say so)
        nvlink_gbps=float(nvlink) / 2 if nvlink else None,
        pcie_gbps=_pcie(entry.get("pcie")),
        source="; ".join(entry.get("sources", ())),
    )


def _pcie(text: Any) -> float:
    """Per-direction PCIe bandwidth from the catalogue's wording ("Gen5 x16, 128 GB/s
    bidirectional"; "Gen4 x16"); Gen4 x16 when it says nothing."""
    if isinstance(text, (int, float)):
        return float(text)
    text = str(text or "").lower()
    m = re.search(r"([\d.]+)\s*gb/s\s*bidirectional", text)
    if m:
        return float(m.group(1)) / 2
    m = re.search(r"gen\s*(\d)", text)
    return _PCIE_GBPS.get(f"gen{m.group(1)}", 32.0) if m else 32.0
