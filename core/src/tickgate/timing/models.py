"""The models a roofline timing model can be built from.

A policy can say ``model: llama-3.1-70b`` or ``model: meta-llama/Llama-3.3-70B-Instruct``
(a catalogue key or a name in an entry's ``applies_to``), or give a path to a Hugging Face
``config.json`` (the fields every decoder config carries, plus the MoE fields of Mixtral,
Qwen-MoE and DeepSeek configs). Names are matched exactly or, failing that,
case-insensitively; an unknown name is a :class:`~tickgate.util.errors.ConfigError`
listing the known ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import ConfigError
from .catalogue import catalogue, find

__all__ = ["ModelSpec", "lookup_model", "model_from_hf_config", "read_hf_config"]


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


def lookup_model(value: str, *, base: Path | None = None) -> ModelSpec:
    """A model by catalogue key, by a name in an entry's ``applies_to``, or from
    a Hugging Face ``config.json`` (a path ending in ``.json``, or a directory
    holding one; relative to ``base``)."""
    models = catalogue()["models"]
    names = {alias: key for key, entry in models.items() for alias in entry.get("applies_to", ())}
    key = find(value, models, names)
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
