"""What one token, one sequence and one step cost on one GPU, for the roofline.

:class:`StepCosts` holds the roofline's coefficients, each in milliseconds per unit, computed
once from the model (:class:`~tickgate.timing.models.ModelSpec`), the GPU, the parallel
:class:`Layout`, the weight formats and the factors. docs/timing.md derives each term; the
short version, per GPU of one attention rank that schedules ``T`` tokens in a step:

* **attention projections, dense MLPs, shared experts** (split by ``tp``): 2 x T x params
  FLOPs at the format's peak, against every weight read once;
* **routed experts**: the step's experts see the tokens of every attention-DP rank
  (``T x dp``, ranks assumed equally loaded: they step together), spread over
  ``moe_tp x moe_ep`` GPUs; each GPU holds ``E / moe_ep`` experts (sliced by ``moe_tp``) and reads
  those the tokens route to, in expectation ``E/ep x (1 - (1 - k/E)^(T dp))``;
* **attention**: GQA reads ``2 x kv_heads x head_dim`` per cached token and layer (heads split
  by ``tp``); MLA reads one latent of ``kv_lora_rank + qk_rope_head_dim`` (replicated on every
  ``tp`` rank, as vLLM and SGLang keep it) and decodes absorbed (``4 kv_lora_rank + 2
  qk_rope_head_dim`` FLOPs per head and cached token) while prefill attends with the
  up-projected heads (``2 (qk_nope + qk_rope) + 2 v_head_dim`` per head and pair);
  sliding-window layers attend at most ``sliding_window`` tokens; linear-attention layers read
  and write a fixed state per sequence;
* **communication**: two all-reduces per layer over the ``tp`` group; with attention DP, the
  MoE's dispatch and combine (all-to-all over ``moe_ep``: fp8 out, bf16 back, as DeepEP sends
  them) or its all-gather and reduce-scatter (over ``moe_tp``); over NVLink within the GPU's
  scale-up domain, over the network beyond it; ``pp - 1`` stage hand-offs.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..util.errors import ConfigError
from .quantization import compute_dtype, weight_bytes

__all__ = ["Layout", "StepCosts", "step_costs"]


@attrs.frozen
class Layout:
    """How a deployment splits the model over GPUs: one attention rank is ``tp x pp`` GPUs;
    ``dp`` ranks (attention data parallelism) share the MoE layers, whose experts are split
    ``moe_tp`` ways within an expert and ``moe_ep`` ways across experts (``moe_tp x moe_ep
    = tp x dp``)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


@attrs.frozen
class StepCosts:
    """The roofline's coefficients for one GPU (ms per unit)."""

    #: dense matmuls per token, their weights once per step
    dense_flop_ms: float
    dense_bytes_ms: float
    #: routed experts: per token of the whole DP group; per expert read
    expert_flop_ms: float
    expert_bytes_ms: float
    local_experts: float
    #: LM head per sampled position; its weights
    lm_flop_ms: float
    lm_bytes_ms: float
    #: prefill attention per (query, key) pair in full layers; in sliding layers
    pair_ms: float
    sliding_pair_ms: float
    #: KV bytes written or read per token, all cached layers
    kv_ms: float
    #: decode attention per context token (full layers)
    slope_ms: float
    #: per decoding sequence: sliding layers' window, linear layers' state
    seq_attention_ms: float
    #: linear-attention work per token
    linear_token_ms: float
    #: communication per token and per step
    comm_token_ms: float
    comm_fixed_ms: float
    kv_token_bytes: float
    weight_bytes: float


def _link_gbps(gpu: Any, gpus: int) -> float:
    """Per-direction bandwidth each GPU sends at in an all-to-all among ``gpus`` GPUs: NVLink
    within the scale-up domain, its NIC beyond it."""
    pick = getattr(gpu, "group_link_gbps", None)
    return float(pick(gpus)) if pick is not None else float(gpu.link_gbps)


def _allreduce_gbps(gpu: Any, gpus: int) -> float:
    """Bus bandwidth of an all-reduce among ``gpus`` GPUs (:meth:`GpuSpec.allreduce_gbps`)."""
    pick = getattr(gpu, "allreduce_gbps", None)
    return float(pick(gpus)) if pick is not None else float(gpu.link_gbps)


def _peak(gpu: Any, fmt: str, option: str) -> float:
    def has(dtype: str) -> bool:
        return bool(gpu.tflops.get(dtype))

    try:
        return float(gpu.peak_tflops(compute_dtype(fmt, has)))
    except ConfigError as exc:
        raise ConfigError(str(exc), option=option) from None


def step_costs(
    model: Any,
    gpu: Any,
    layout: Layout,
    formats: dict[str, Any],
    factors: dict[str, float],
) -> StepCosts:
    """The coefficients of ``model`` on ``gpu`` with ``layout``; ``formats``: weight formats
    of ``gemm``, ``attention`` and ``moe`` (:data:`~tickgate.timing.quantization.WEIGHT_FORMATS`)
    and the KV cache's element bytes under ``kv``."""
    m, lay = model, layout
    tp, dp = lay.tp, lay.dp
    compute, memory = factors["compute_efficiency"], factors["memory_efficiency"]
    hbm = gpu.hbm_bandwidth_gbps * 1e6 * memory  # byte/ms
    attention_peak = gpu.peak_tflops("bf16") * 1e9 * factors["attention_efficiency"]
    kv_bytes = float(formats["kv"])
    h = m.hidden_size
    heads = m.num_attention_heads // tp

    # -- dense matmuls: attention projections at their format, MLPs and shared experts at gemm's
    attn_fmt, gemm_fmt, moe_fmt = formats["attention"], formats["gemm"], formats["moe"]
    attn_params, mlp_params = m.num_layers * m.attention_params, m.dense_mlp_params
    gemm_peak = _peak(gpu, gemm_fmt, "dtype") * 1e9 * compute
    if attn_fmt == gemm_fmt:  # one product, in the order the dense roofline always had
        dense_flop_ms = 2 * (attn_params + mlp_params) / tp / gemm_peak
        dense_bytes = (attn_params + mlp_params) * weight_bytes(gemm_fmt) / tp
    else:
        attn_peak = _peak(gpu, attn_fmt, "dtype") * 1e9 * compute
        dense_flop_ms = 2 * attn_params / tp / attn_peak + 2 * mlp_params / tp / gemm_peak
        dense_bytes = (attn_params * weight_bytes(attn_fmt) + mlp_params * weight_bytes(gemm_fmt)) / tp

    # -- routed experts, over the whole DP group's tokens
    expert_gpus = lay.moe_tp * lay.moe_ep
    expert_flop_ms = expert_bytes_ms = local_experts = 0.0
    if m.num_experts:
        moe_peak = _peak(gpu, moe_fmt, "moe_dtype") * 1e9 * compute
        expert_flop_ms = 2 * m.moe_layers * m.experts_per_token * m.expert_params / expert_gpus / moe_peak
        expert_bytes_ms = m.moe_layers * m.expert_params * weight_bytes(moe_fmt) / lay.moe_tp / hbm
        local_experts = m.num_experts / lay.moe_ep

    # -- LM head: vocabulary split by tp, kept in 16 bits under quantization
    lm_flop_ms = 2 * h * m.vocab_size / tp / (gpu.peak_tflops("bf16") * 1e9 * compute)
    lm_bytes_ms = h * m.vocab_size * 2 / tp / hbm

    # -- attention
    full, sliding = m.full_layers, m.sliding_layers
    if m.mla:
        latent = m.kv_lora_rank + m.qk_rope_head_dim
        kv_per_layer = latent * kv_bytes  # replicated on every tp rank
        prefill_flops = 2 * (m.qk_head_dim + m.value_head_dim) * heads
        decode_flops = (4 * m.kv_lora_rank + 2 * m.qk_rope_head_dim) * heads
    else:
        kv_heads = max(1, m.num_kv_heads // tp)
        kv_per_layer = 2 * kv_heads * m.head_dim * kv_bytes
        prefill_flops = decode_flops = 4 * heads * m.head_dim
    kv_token_bytes = full * kv_per_layer / lay.pp
    pair_ms = full * prefill_flops / attention_peak
    sliding_pair_ms = sliding * prefill_flops / attention_peak
    slope_ms = max(full * decode_flops / attention_peak, full * kv_per_layer / hbm)
    seq_attention_ms = 0.0
    if sliding:
        window = m.sliding_window
        seq_attention_ms += max(
            sliding * decode_flops * window / attention_peak, sliding * kv_per_layer * window / hbm
        )
    linear_token_ms = 0.0
    if m.linear_layers:
        state = m.linear_state_bytes / tp
        seq_attention_ms += m.linear_layers * 2 * state / hbm  # read and write once per step
        value_heads = m.linear_value_heads / tp
        linear_token_ms = (
            m.linear_layers * 4 * value_heads * m.linear_key_head_dim * m.linear_value_head_dim
        ) / attention_peak
    kv_ms = (full + sliding) * kv_per_layer / hbm  # what a prefill token writes

    # -- communication
    link_efficiency, latency_ms = factors["link_efficiency"], factors["allreduce_latency_us"] / 1000
    comm_token_ms = comm_fixed_ms = 0.0
    if tp > 1:
        link = _allreduce_gbps(gpu, tp) * 1e6 * link_efficiency
        comm_token_ms += 2 * m.num_layers * 2 * (tp - 1) / tp * h * 2 / link
        comm_fixed_ms += 2 * m.num_layers * factors["allreduce_latency_us"] / 1000
    if dp > 1 and m.num_experts:
        link = _link_gbps(gpu, lay.gpus) * 1e6 * link_efficiency
        if lay.moe_ep > 1:  # dispatch (fp8) and combine (bf16) of every routed copy
            share = (lay.moe_ep - 1) / lay.moe_ep
            per_token = m.experts_per_token * h * 3 * share * dp / expert_gpus
            comm_token_ms += m.moe_layers * per_token / link
            comm_fixed_ms += 2 * m.moe_layers * latency_ms
        if lay.moe_tp > 1:  # all-gather in, reduce-scatter out
            link = _allreduce_gbps(gpu, lay.moe_tp) * 1e6 * link_efficiency
            share = (lay.moe_tp - 1) / lay.moe_tp
            comm_token_ms += m.moe_layers * 2 * h * 2 * share * dp / link
            comm_fixed_ms += 2 * m.moe_layers * latency_ms
    if lay.pp > 1:  # the activations handed from stage to stage
        link = _link_gbps(gpu, lay.gpus) * 1e6 * link_efficiency
        comm_token_ms += (lay.pp - 1) * h * 2 / link
        comm_fixed_ms += (lay.pp - 1) * latency_ms

    embed = m.vocab_size * h * (1 if m.tie_word_embeddings else 2)
    norms = (2 * m.num_layers + 1) * h
    experts = m.moe_layers * m.num_experts * m.expert_params
    if attn_fmt == gemm_fmt == moe_fmt and expert_gpus == tp:  # the dense roofline's order
        weights = ((m.weight_params - embed) * weight_bytes(gemm_fmt) + embed * 2) / tp
    else:
        weights = dense_bytes + (norms * weight_bytes(gemm_fmt) + embed * 2) / tp
        weights += experts * weight_bytes(moe_fmt) / expert_gpus
    weights /= lay.pp
    return StepCosts(
        dense_flop_ms=dense_flop_ms,
        dense_bytes_ms=dense_bytes / hbm,
        expert_flop_ms=expert_flop_ms,
        expert_bytes_ms=expert_bytes_ms,
        local_experts=local_experts,
        lm_flop_ms=lm_flop_ms,
        lm_bytes_ms=lm_bytes_ms,
        pair_ms=pair_ms,
        sliding_pair_ms=sliding_pair_ms,
        kv_ms=kv_ms,
        slope_ms=slope_ms,
        seq_attention_ms=seq_attention_ms,
        linear_token_ms=linear_token_ms,
        comm_token_ms=comm_token_ms,
        comm_fixed_ms=comm_fixed_ms,
        kv_token_bytes=kv_token_bytes,
        weight_bytes=weights,
    )
