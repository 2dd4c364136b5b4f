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

__all__ = ["ModelSpec", "Quantization", "lookup_model"]


@attrs.frozen
class Quantization:
    """How a checkpoint stores its weights and KV cache: one of :data:`WEIGHT_FORMATS` for
    the dense matmuls (attention projections, dense MLPs, shared experts) and one for the
    routed experts, and the KV cache's element type (None: the engine's ``auto``).
    ``attention`` is the format of the attention projections when the checkpoint keeps
    them apart (gpt-oss keeps ``self_attn`` in bf16; NVIDIA's NVFP4 DeepSeek keeps its MLA
    projections unquantized)."""

    gemm: str = "bf16"
    moe: str = "bf16"
    attention: str | None = None
    kv_cache: str | None = None
    #: where it was read ("quantization_config.quant_method", "hf_quant_config.json", ...)
    source: str = ""


@attrs.frozen
class ModelSpec:
    """A decoder-only transformer's shape: what its steps compute and move.

    ``num_experts`` > 0 makes the MLP a mixture of experts: each token runs
    ``experts_per_token`` experts of ``moe_intermediate_size`` (plus a shared
    expert of ``shared_intermediate_size`` when the model has one) in every
    layer from ``first_moe_layer`` on; the layers before it are dense.

    ``kv_lora_rank`` > 0 makes attention multi-head latent attention (DeepSeek-V2/V3/R1):
    the cache holds one latent of ``kv_lora_rank + qk_rope_head_dim`` per token and layer,
    shared by every head. ``sliding_layers`` of the layers attend only the last
    ``sliding_window`` tokens (gpt-oss alternates them with full layers);
    ``linear_layers`` are linear attention (Qwen3.5's Gated DeltaNet): a fixed state per
    sequence, no KV that grows.
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
    # multi-head latent attention
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # hybrid layers
    sliding_window: int = 0
    sliding_layers: int = 0
    linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    #: a gate on the attention output (Qwen3.5: the q projection is twice as wide)
    attention_output_gate: bool = False
    quantization: Quantization | None = None

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def full_layers(self) -> int:
        """Layers whose attention reads every earlier token."""
        return self.num_layers - self.sliding_layers - self.linear_layers

    @property
    def softmax_layers(self) -> int:
        """Layers with softmax attention (full or sliding) and a KV cache."""
        return self.num_layers - self.linear_layers

    @property
    def qk_head_dim(self) -> int:
        """Width of a head's query and key (MLA: the no-position part and the rotary part)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.mla else self.head_dim

    @property
    def softmax_attention_params(self) -> int:
        """Projections of one softmax-attention layer (no biases). GQA: q, k, v, o. MLA: the
        query's down and up projections (or one projection without ``q_lora_rank``), the
        joint KV down projection with its rotary key, the KV up projection, o."""
        h, heads = self.hidden_size, self.num_attention_heads
        if self.mla:
            qk = heads * self.qk_head_dim
            q = h * self.q_lora_rank + self.q_lora_rank * qk if self.q_lora_rank else h * qk
            kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv_up = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_down + kv_up + heads * self.v_head_dim * h
        d = self.head_dim
        q = h * heads * d * (2 if self.attention_output_gate else 1)
        return q + h * heads * d + h * self.num_kv_heads * d * 2

    @property
    def linear_attention_params(self) -> int:
        """Projections of one linear-attention layer (Gated DeltaNet: q, k, v and the output
        gate z in, the per-head decay and beta, the output)."""
        h = self.hidden_size
        keys = self.linear_key_heads * self.linear_key_head_dim
        values = self.linear_value_heads * self.linear_value_head_dim
        return h * (2 * keys + 2 * values) + h * 2 * self.linear_value_heads + values * h

    @property
    def attention_params(self) -> int:
        """Attention projections per layer, averaged over the layers (linear ones included)."""
        total = self.softmax_layers * self.softmax_attention_params
        total += self.linear_layers * self.linear_attention_params
        return total // self.num_layers if self.linear_layers else self.softmax_attention_params

    @property
    def linear_state_bytes(self) -> int:
        """One sequence's recurrent state in one linear-attention layer (fp32, as
        ``mamba_ssm_dtype`` keeps it): a key x value matrix per value head."""
        return self.linear_value_heads * self.linear_key_head_dim * self.linear_value_head_dim * 4

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
    def dense_mlp_params(self) -> int:
        """The MLP weights outside the routed experts, all layers: dense layers' MLPs, shared
        experts and routers."""
        dense_mlp = 3 * self.hidden_size * self.intermediate_size
        return self.dense_layers * dense_mlp + self.moe_layers * (
            self.shared_params + self.hidden_size * self.num_experts
        )

    @property
    def active_params(self) -> int:
        """Matmul weights one token multiplies through, all layers, without the
        embedding and the LM head (MoE: the routed experts it runs, the shared
        expert and the router)."""
        return (
            self.num_layers * self.attention_params
            + self.dense_mlp_params
            + self.moe_layers * self.experts_per_token * self.expert_params
        )

    @property
    def weight_params(self) -> int:
        """Every weight the GPUs hold: all experts, embedding and LM head (once if tied)."""
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        norms = (2 * self.num_layers + 1) * self.hidden_size
        return (
            self.num_layers * self.attention_params
            + self.dense_mlp_params
            + self.moe_layers * self.num_experts * self.expert_params
            + embed
            + norms
        )

    def kv_bytes_per_token(self, element_bytes: float) -> float:
        """What one more token adds to the cache over all layers (all KV heads). MLA: one
        latent per layer; sliding-window and linear-attention layers add nothing once past
        their window (vLLM's hybrid allocator frees a sliding layer's blocks that leave the
        window; a linear layer's state has a fixed size)."""
        if self.mla:
            return self.full_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * element_bytes
        return 2 * self.full_layers * self.num_kv_heads * self.head_dim * element_bytes


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
        from .hf_config import model_from_hf_config, read_hf_config, read_quant_config

        quant = read_quant_config(path)
        return model_from_hf_config(read_hf_config(text, path), key=str(value), file=path, quant=quant)
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
