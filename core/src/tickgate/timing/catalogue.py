"""The models and GPUs a roofline timing model can be built from.

``catalogue.json`` ships with the package: it is the facts file of
``realdata/measured/models_hardware.json`` (every model config and GPU peak,
each with the URL it was read from), so a policy can say ``model:
llama-3.1-70b`` or ``model: meta-llama/Llama-3.3-70B-Instruct`` and ``gpu:
H100-SXM-80GB`` (or an alias such as ``H100-80GB-unspecified``). A model can
also be a path to a Hugging Face ``config.json`` (the fields every decoder
config carries, plus the MoE fields of Mixtral, Qwen-MoE and DeepSeek configs),
and a GPU a mapping of its figures. Names are matched exactly or, failing that,
case-insensitively; a GPU also by a short name that fits one catalogue GPU
(``H100``), never by one that fits several (``A100``: refused with the choices);
an unknown name is a :class:`~tickgate.util.errors.ConfigError` listing the
known ones.
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
        if path.exists() and not path.is_file():  # a named pipe would block the read
            raise ConfigError(f"model {value!r}: {path} is not a regular file")
        try:
            text = path.read_text(encoding="utf-8-sig")  # a leading byte order mark dropped
        except OSError as exc:
            raise ConfigError(f"model {value!r}: cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"model {value!r}: {path} is not UTF-8 text (byte {exc.start})") from None
        return model_from_hf_config(read_hf_config(text, path), key=str(value), file=path)
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


def read_hf_config(text: str, path: Path) -> dict[str, Any]:
    """A ``config.json``'s text, parsed strictly (no NaN) and checked against
    ``schemas/model-config.schema.json``: the sizes the roofline divides and multiplies by
    are positive integers. An error names the file, the line and the JSON path."""
    from ..util.errors import InputError
    from ..util.locations import parse_json
    from ..util.schemas import load_schema, validate

    config = parse_json(text, path)
    if not isinstance(config, dict):
        raise InputError(path, "expected a JSON object (a Hugging Face config.json)", line=1)
    schema = load_schema("model-config.schema.json")
    try:
        validate(config, schema, file=path)
    except InputError:
        locations = _locations(path)
        if locations is None:
            raise
        validate(config, schema, file=path, locations=locations)  # the same error, with its line
        raise
    return config


def _locations(path: Path) -> dict[str, tuple[int, int]] | None:
    """Where each value of a JSON file is (JSON is YAML), for an error's line and column;
    None when the file does not read so."""
    from ..util.errors import InputError
    from ..util.locations import load_yaml

    try:
        return load_yaml(path)[1]
    except InputError:
        return None


class _Fields:
    """A config's fields as :func:`model_from_hf_config` reads them (``text_config`` over the
    top level), each with where it is, for errors."""

    def __init__(self, config: Mapping[str, Any], key: str, file: Path | None) -> None:
        text = config.get("text_config")
        self.inner: Mapping[str, Any] = text if isinstance(text, Mapping) else {}
        self.config = {**config, **self.inner}
        self.key = key
        self.file = file

    def where(self, name: str) -> str:
        return f"$.text_config.{name}" if name in self.inner else f"$.{name}"

    def error(self, message: str, name: str | None = None) -> Exception:
        """A config file's mistake at ``name`` (its file, line and JSON path); a mapping's
        (no file) a :class:`ConfigError` naming the model."""
        if self.file is None:
            return ConfigError(f"model {self.key!r}: config.json {message}")
        from ..util.errors import InputError

        json_path = self.where(name) if name else "$"
        line, column = (_locations(self.file) or {}).get(json_path, (None, None))
        return InputError(self.file, message, line=line, column=column, json_path=json_path)

    def number(self, *names: str, default: int | None = None) -> int:
        for name in names:
            value = self.config.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        if default is not None:
            return default
        raise self.error(f"has no integer {' / '.join(names)}")

    def found(self, *names: str) -> str:
        """The first of ``names`` the config has: where a value read by :meth:`number` is."""
        return next((n for n in names if isinstance(self.config.get(n), int)), names[0])


def model_from_hf_config(
    config: Mapping[str, Any], *, key: str = "config.json", file: Path | None = None
) -> ModelSpec:
    """A model from a Hugging Face ``config.json``: the decoder fields
    (``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads``, ``head_dim``, ``intermediate_size``,
    ``vocab_size``) and the MoE fields of Mixtral (``num_local_experts``),
    Qwen-MoE (``num_experts``, ``moe_intermediate_size``,
    ``shared_expert_intermediate_size``) and DeepSeek (``n_routed_experts``,
    ``n_shared_experts``, ``first_k_dense_replace``). Multimodal configs keep
    the language model under ``text_config``. ``file``: where ``config`` was read
    (:func:`read_hf_config` checked its fields); a field missing, or fields that
    contradict each other, are errors naming it and the JSON path."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"model {key!r}: config.json is not an object")
    if file is None:  # a mapping given in code: the checks read_hf_config makes of a file
        from ..util.errors import InputError
        from ..util.schemas import load_schema, validate

        try:
            validate(dict(config), load_schema("model-config.schema.json"), file=None)
        except InputError as exc:
            raise ConfigError(f"model {key!r}: config.json {exc.json_path}: {exc.message}") from None
    f = _Fields(config, key, file)
    hidden = f.number("hidden_size", "n_embd", "d_model")
    heads = f.number("num_attention_heads", "n_head")
    layers = f.number("num_hidden_layers", "n_layer", "num_layers")
    experts = f.number("num_local_experts", "num_experts", "n_routed_experts", default=0)
    moe_inter = f.number("moe_intermediate_size", default=0)
    shared = f.number("shared_expert_intermediate_size", default=0)
    if not shared and f.config.get("n_shared_experts"):
        shared = f.number("n_shared_experts") * moe_inter
    inter = f.number("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
    kv_heads = f.number("num_key_value_heads", default=heads)
    head_dim = f.number("head_dim", default=hidden // heads)
    per_token = f.number("num_experts_per_tok", default=2 if experts else 0)
    first_moe = f.number("first_k_dense_replace", default=0) if experts else 0
    # what the schema cannot say: fields that contradict each other
    if head_dim < 1:
        raise f.error(
            f"{f.found('hidden_size', 'n_embd', 'd_model')} {hidden} is smaller than "
            f"num_attention_heads {heads}, and no head_dim says how wide a head is",
            f.found("hidden_size", "n_embd", "d_model"),
        )
    if kv_heads > heads:
        raise f.error(
            f"num_key_value_heads {kv_heads} is more than num_attention_heads {heads}", "num_key_value_heads"
        )
    if experts and per_token > experts:
        raise f.error(
            f"num_experts_per_tok {per_token} is more than the model's {experts} experts "
            f"({f.found('num_local_experts', 'num_experts', 'n_routed_experts')})",
            "num_experts_per_tok",
        )
    if first_moe > layers:
        raise f.error(
            f"first_k_dense_replace {first_moe} is more than num_hidden_layers {layers}",
            "first_k_dense_replace",
        )
    return ModelSpec(
        key=key,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=f.number("vocab_size"),
        tie_word_embeddings=bool(f.config.get("tie_word_embeddings", False)),
        max_position_embeddings=f.config.get("max_position_embeddings"),
        num_experts=experts,
        experts_per_token=per_token,
        moe_intermediate_size=(moe_inter or inter) if experts else 0,
        shared_intermediate_size=shared,
        first_moe_layer=first_moe,
        source=key,
    )


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
        key = _short_gpu_name(value, gpus, aliases)
    if key is None:
        raise ConfigError(
            f"unknown GPU {value!r} (known: {', '.join(sorted({*gpus, *aliases}))}; "
            "or give its figures as a mapping)"
        )
    return _gpu(key, gpus[key])


def _gpu_words(name: str) -> set[str]:
    """The words of a GPU name as people write them: ``H100 SXM``, ``h100-sxm5-80g`` and
    ``NVIDIA H100-SXM-80GB`` share ``{h100, sxm, 80gb}`` (the SXM generation and the
    vendor dropped, a memory size in GB either way)."""
    words = set()
    for word in re.split(r"[\s_/-]+", name.casefold()):
        word = re.sub(r"^(\d+)g$", r"\1gb", re.sub(r"^sxm\d$", "sxm", word))
        if word and word != "nvidia":
            words.add(word)
    return words


def _short_gpu_name(value: str, gpus: Mapping[str, Any], aliases: Mapping[str, str]) -> str | None:
    """The catalogue GPU a short name (``H100``, ``A100-PCIe``, ``L40S``) means: the one GPU
    whose key, or an alias of which, has every word of it. A name that fits more than one GPU
    is refused listing them (``A100``: the SXM4 and the PCIe card differ in bandwidth and
    clocks); None when it fits none."""
    words = _gpu_words(value)
    if not words:
        return None
    fits = {key for key in gpus if words <= _gpu_words(key)}
    fits |= {key for alias, key in aliases.items() if words <= _gpu_words(alias) and key in gpus}
    if len(fits) > 1:
        named = [
            f"the alias {alias} (assumes {key})"
            for alias, key in sorted(aliases.items())
            if words <= _gpu_words(alias)
        ]
        raise ConfigError(
            f"GPU {value!r} is ambiguous: it could be {' or '.join(sorted(fits))}; name one of them"
            + (f", or {' or '.join(named)}" if named else "")
        )
    return fits.pop() if fits else None


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
