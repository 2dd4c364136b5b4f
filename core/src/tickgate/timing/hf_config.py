"""A model's shape from its Hugging Face ``config.json`` (and ``hf_quant_config.json``).

Read by field, whatever the family: the decoder fields every config carries, the MoE fields
of Mixtral, Qwen-MoE, gpt-oss, MiniMax and DeepSeek, DeepSeek's multi-head latent attention
(``kv_lora_rank``, ``q_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``,
``v_head_dim``), hybrid layers (``layer_types``: full, sliding-window and linear attention, with
``sliding_window`` and Qwen3.5's ``linear_*`` sizes) and the checkpoint's quantization
(:mod:`.quantization`). A layer kind or a format tickgate does not know is an error naming the
file, the line and the JSON path, never a silent fallback to a dense model in 16 bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..util.errors import ConfigError
from .models import ModelSpec, Quantization
from .quantization import quantization_from_configs

__all__ = ["model_from_hf_config", "read_hf_config", "read_quant_config"]

#: the ``layer_types`` entries tickgate prices, and which count they add to
LAYER_KINDS = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear"}


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


def read_quant_config(config_path: Path) -> tuple[dict[str, Any], Path] | None:
    """The ``hf_quant_config.json`` beside a ``config.json`` (``NAME_hf_quant_config.json``
    beside ``NAME_config.json``, as aiconfigurator's model directory names them), parsed; None
    when there is none."""
    name = config_path.name
    stem = name[: -len("config.json")] if name.endswith("config.json") else None
    if stem is None:
        return None
    path = config_path.with_name(f"{stem}hf_quant_config.json")
    if not path.is_file():
        return None
    from ..util.errors import InputError
    from ..util.locations import parse_json

    try:
        data = parse_json(path.read_text(encoding="utf-8-sig"), path)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object (an hf_quant_config.json)", line=1)
    return data, path


def model_from_hf_config(
    config: Mapping[str, Any],
    *,
    key: str = "config.json",
    file: Path | None = None,
    quant: tuple[Mapping[str, Any], Path] | None = None,
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
    shared = f.number("shared_expert_intermediate_size", "shared_intermediate_size", default=0)
    if not shared and f.config.get("n_shared_experts"):
        shared = f.number("n_shared_experts") * moe_inter
    inter = f.number("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
    kv_heads = f.number("num_key_value_heads", default=heads)
    head_dim = f.number("head_dim", default=hidden // heads)
    per_token = f.number("num_experts_per_tok", "experts_per_token", default=2 if experts else 0)
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
    mla = _mla(f)
    kinds = _layer_kinds(f, layers)
    window = f.number("sliding_window", default=0) if kinds["sliding"] else 0
    if kinds["sliding"] and not window:
        raise f.error("has sliding_attention layers but no integer sliding_window", "layer_types")
    linear = _linear(f) if kinds["linear"] else {}
    for step_name in ("decoder_sparse_step", "moe_layer_freq"):
        step = f.config.get(step_name)
        if experts and isinstance(step, int) and step > 1:
            raise f.error(
                f"{step_name} {step}: MoE on every {step}th layer is not priced by tickgate "
                "(every layer from first_k_dense_replace is)",
                step_name,
            )
    quant_fields = quantization_from_configs(
        config, file, quant[0] if quant else None, quant[1] if quant else None
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
        sliding_window=window,
        sliding_layers=kinds["sliding"],
        linear_layers=kinds["linear"],
        attention_output_gate=bool(f.config.get("attn_output_gate", False)),
        quantization=Quantization(**quant_fields) if quant_fields else None,
        **mla,
        **linear,
    )


def _mla(f: Any) -> dict[str, int]:
    """DeepSeek's latent attention fields (all of them, or none)."""
    if not f.config.get("kv_lora_rank"):
        return {}
    fields = {
        "kv_lora_rank": f.number("kv_lora_rank"),
        "qk_nope_head_dim": f.number("qk_nope_head_dim"),
        "qk_rope_head_dim": f.number("qk_rope_head_dim"),
        "v_head_dim": f.number("v_head_dim"),
    }
    fields["q_lora_rank"] = f.number("q_lora_rank", default=0)
    return fields


def _layer_kinds(f: Any, layers: int) -> dict[str, int]:
    """How many layers of each kind: ``layer_types`` when the config lists them, else every
    layer sliding when ``sliding_window`` is set and not switched off (Mistral's meaning; Qwen2/3
    set ``use_sliding_window: false``), else every layer full."""
    kinds = {"full": 0, "sliding": 0, "linear": 0}
    types = f.config.get("layer_types")
    if types is None:
        window = f.config.get("sliding_window")
        if isinstance(window, int) and window > 0 and f.config.get("use_sliding_window", True) is not False:
            kinds["sliding"] = layers
        else:
            kinds["full"] = layers
        return kinds
    if not isinstance(types, list) or len(types) != layers:
        raise f.error(
            f"layer_types must list one kind per layer ({layers}, num_hidden_layers)", "layer_types"
        )
    for index, kind in enumerate(types):
        if kind not in LAYER_KINDS:
            raise f.error(
                f"layer_types[{index}] {kind!r} is not a layer kind tickgate prices "
                f"({', '.join(LAYER_KINDS)})",
                "layer_types",
            )
        kinds[LAYER_KINDS[kind]] += 1
    return kinds


def _linear(f: Any) -> dict[str, int]:
    """Qwen3.5's linear-attention (Gated DeltaNet) sizes."""
    return {
        "linear_key_heads": f.number("linear_num_key_heads"),
        "linear_value_heads": f.number("linear_num_value_heads"),
        "linear_key_head_dim": f.number("linear_key_head_dim"),
        "linear_value_head_dim": f.number("linear_value_head_dim"),
    }
