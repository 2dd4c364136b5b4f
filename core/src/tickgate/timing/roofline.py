"""The ``roofline`` timing model: a step's duration from the model and the GPU.

A step runs every scheduled token through the model once. Each part of the
step is priced as a roofline, the larger of its compute time (FLOPs against
the GPU's dense tensor-core peak x an efficiency) and its memory time (bytes
against HBM bandwidth x an efficiency), and the parts are added::

    step_ms = step_overhead_ms + layers * layer_overhead_us / 1000
            + per_seq_overhead_us * sequences / 1000
            + roofline(body matmuls)      2 * tokens * active params / tp   | weights read once / tp
            + roofline(LM head)           2 * sampled * hidden * vocab / tp | hidden * vocab * 2 bytes / tp
            + roofline(prefill attention) 4 * layers * heads * head_dim * (query, key) pairs / tp
                                          | KV of the chunks' earlier context read, their own KV written
            + roofline(decode attention)  4 * layers * heads * head_dim * context / tp | KV read and written
            + tensor-parallel all-reduce  2 per layer, ring: 2 (tp - 1) / tp * tokens * hidden * 2 bytes
                                          over the link, plus a fixed latency each

where tokens = prefill tokens + decoding sequences, sampled = decoding sequences
+ prefill chunks (only the last position of a chunk reaches the LM head, as in
vLLM's and SGLang's ``compute_logits``), a causal chunk of c tokens after p
computed ones attends c * p + c * (c + 1) / 2 (query, key) pairs, and a decoding
sequence with context n attends n + 1. docs/timing.md derives each term, cites
where the figures come from and lists what is simplified.

The decode-attention term is linear in the context (FLOPs and bytes both grow
with it, so one of the two always binds), which makes a decode-only step
``base(seqs) + slope * context``: :meth:`RooflineTiming.decode_durations`
prices a span of them in closed form, as the linear model does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import repeat
from operator import add, mul
from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import TimingModel
from ..util.errors import ConfigError
from ..util.schemas import load_schema
from .catalogue import DTYPE_BYTES
from .gpus import GpuSpec, lookup_gpu
from .models import ModelSpec, lookup_model
from .quantization import WEIGHT_FORMATS
from .step_costs import Layout, step_costs

__all__ = ["ENGINE_DEFAULTS", "FACTORS", "RooflineTiming"]

#: the free factors ``tickgate timing fit`` may adjust, with what each scales
FACTORS = {
    "compute_efficiency": "fraction of the dense tensor-core peak the matmuls reach",
    "attention_efficiency": "fraction of the bf16 peak attention kernels reach",
    "memory_efficiency": "fraction of HBM bandwidth weight and KV reads reach",
    "link_efficiency": "fraction of the link bandwidth an all-reduce reaches",
    "allreduce_latency_us": "fixed cost of one tensor-parallel all-reduce",
    "step_overhead_ms": "fixed cost of one step (scheduling, launch, sampling, output processing)",
    "layer_overhead_us": "fixed cost per layer and step (kernel launches and small-kernel tails)",
    "per_seq_overhead_us": "cost per sequence in the step (input preparation, sampling, detokenizing)",
    "frontend_ms": "a request's way in and out of the engine (HTTP, tokenization, IPC, streaming), "
    "added to TTFT and end-to-end latency as a client measures them",
    "frontend_request_us": "serial front-end work per request (setting it up)",
    "frontend_token_us": "serial front-end work per output token (detokenizing, streaming it back)",
}

#: defaults by engine family; docs/timing.md says where each figure comes from
ENGINE_DEFAULTS: dict[str, dict[str, float]] = {
    "generic": {
        "compute_efficiency": 0.6,
        "attention_efficiency": 0.5,
        "memory_efficiency": 0.8,
        "link_efficiency": 0.7,
        "allreduce_latency_us": 20.0,
        "step_overhead_ms": 1.0,
        "layer_overhead_us": 20.0,
        "per_seq_overhead_us": 20.0,
        "frontend_ms": 5.0,
        "frontend_request_us": 0.0,
        "frontend_token_us": 0.0,
    },
    "vllm": {
        "compute_efficiency": 0.6,
        "attention_efficiency": 0.5,
        "memory_efficiency": 0.8,
        "link_efficiency": 0.7,
        "allreduce_latency_us": 20.0,
        "step_overhead_ms": 1.5,
        "layer_overhead_us": 10.0,
        "per_seq_overhead_us": 30.0,
        "frontend_ms": 5.0,
        "frontend_request_us": 0.0,
        "frontend_token_us": 80.0,
    },
    "sglang": {
        "compute_efficiency": 0.55,
        "attention_efficiency": 0.5,
        "memory_efficiency": 0.8,
        "link_efficiency": 0.7,
        "allreduce_latency_us": 20.0,
        "step_overhead_ms": 2.0,
        "layer_overhead_us": 20.0,
        "per_seq_overhead_us": 60.0,
        "frontend_ms": 20.0,
        "frontend_request_us": 0.0,
        "frontend_token_us": 0.0,
    },
    "trtllm": {
        "compute_efficiency": 0.6,
        "attention_efficiency": 0.5,
        "memory_efficiency": 0.8,
        "link_efficiency": 0.7,
        "allreduce_latency_us": 40.0,
        "step_overhead_ms": 0.5,
        "layer_overhead_us": 40.0,
        "per_seq_overhead_us": 2.0,
        "frontend_ms": 5.0,
        "frontend_request_us": 0.0,
        "frontend_token_us": 0.0,
    },
}

#: the share of a GPU's memory CUDA makes available (see RooflineTiming.gpu_memory_bytes)
CUDA_VISIBLE_MEMORY = 0.99

_NUMBER = {"type": "number", "minimum": 0, "maximum": 1e6}
_FRACTION = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}


#: a GPU given by its figures: schemas/gpu.schema.json (the catalogue's field names; any other key
#: refused by name, so a misspelt bandwidth cannot fall back to a default silently). Its
#: ``$schema`` and ``$id`` stay out: they would make the branch a separate document inside the
#: options schema.
_GPU_FIGURES = {k: v for k, v in load_schema("gpu.schema.json").items() if k not in ("$schema", "$id")}


def _factor_schema(key: str, what: str) -> dict[str, Any]:
    base = _FRACTION if key.endswith("efficiency") else _NUMBER
    return {**base, "description": what}


class RooflineTiming(TimingModel):
    name = "roofline"
    description = (
        "step time from the model's FLOPs and bytes against the GPU's peaks, plus all-reduce and overhead"
    )
    options_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["model", "gpu"],
        "properties": {
            "model": {
                "type": "string",
                "minLength": 1,
                "description": "catalogue key or name (tickgate timing models), or a path to a "
                "Hugging Face config.json",
            },
            "gpu": {
                "oneOf": [{"type": "string", "minLength": 1}, _GPU_FIGURES],
                "description": "catalogue key or alias, or the GPU's figures",
            },
            "dtype": {
                "enum": ["auto", *WEIGHT_FORMATS],
                "description": "weights and matmuls (auto, the default: the checkpoint's "
                "quantization, else bf16)",
            },
            "moe_dtype": {
                "enum": ["auto", *WEIGHT_FORMATS],
                "description": "the routed experts' weights (auto: the checkpoint's, else dtype)",
            },
            "kv_cache_dtype": {
                "enum": ["auto", "bf16", "fp16", "fp8"],
                "description": "KV cache elements (auto: bf16, fp16 for fp16 weights)",
            },
            "tensor_parallel_size": {"type": "integer", "minimum": 1, "maximum": 1024},
            "pipeline_parallel_size": {"type": "integer", "minimum": 1, "maximum": 1024},
            "attention_dp_size": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1024,
                "description": "attention data-parallel ranks sharing the MoE layers (the replay "
                "is one rank's; the others step with it, equally loaded)",
            },
            "moe_tensor_parallel_size": {"type": "integer", "minimum": 1, "maximum": 1024},
            "moe_expert_parallel_size": {"type": "integer", "minimum": 1, "maximum": 1024},
            "engine": {
                "enum": sorted(ENGINE_DEFAULTS),
                "description": "whose defaults the factors start from (default generic)",
            },
            **{key: _factor_schema(key, what) for key, what in FACTORS.items()},
        },
    }

    model: ModelSpec
    gpu: GpuSpec

    @classmethod
    def build(cls, options: Mapping[str, Any]) -> RooflineTiming:
        return cls(options)

    def __init__(self, options: Mapping[str, Any], *, base: Path | None = None) -> None:
        self.options = dict(options)
        engine = options.get("engine", "generic")
        factors = {**ENGINE_DEFAULTS[engine], **{k: float(v) for k, v in options.items() if k in FACTORS}}
        self.factors = factors
        self.engine = engine
        try:
            self.model = lookup_model(str(options["model"]), base=base)
        except ConfigError as exc:
            raise ConfigError(str(exc), option="model") from None
        try:
            self.gpu = lookup_gpu(options["gpu"])
        except ConfigError as exc:
            raise ConfigError(str(exc), option="gpu") from None
        quant = self.model.quantization
        dtype = options.get("dtype", "auto")
        self.dtype = dtype if dtype != "auto" else (quant.gemm if quant else "bf16")
        moe = options.get("moe_dtype", "auto")
        self.moe_dtype = moe if moe != "auto" else (quant.moe if quant and dtype == "auto" else self.dtype)
        attention = quant.attention if quant and dtype == "auto" and quant.attention else self.dtype
        kv = options.get("kv_cache_dtype", "auto")
        self.kv_cache_dtype = ("fp16" if self.dtype == "fp16" else "bf16") if kv == "auto" else kv
        self.tp = tp = int(options.get("tensor_parallel_size", 1))
        self.layout = layout = _layout(options, self.model)
        m = self.model
        if m.num_attention_heads % tp:
            raise ConfigError(
                f"tensor_parallel_size {tp} does not divide the model's "
                f"{m.num_attention_heads} attention heads",
                option="tensor_parallel_size",
            )
        formats = {"gemm": self.dtype, "attention": attention, "moe": self.moe_dtype}
        costs = step_costs(m, self.gpu, layout, {**formats, "kv": DTYPE_BYTES[self.kv_cache_dtype]}, factors)
        self.costs = costs
        self.kv_token_bytes = costs.kv_token_bytes  # per GPU
        self._overhead_ms = factors["step_overhead_ms"] + m.num_layers * factors["layer_overhead_us"] / 1000
        self._per_seq_ms = factors["per_seq_overhead_us"] / 1000
        self.frontend_ms = factors["frontend_ms"]
        self._frontend_request_ms = factors["frontend_request_us"] / 1000
        self._frontend_token_ms = factors["frontend_token_us"] / 1000
        # decode attention: a context token costs the larger of its FLOPs and its KV read
        self._slope = costs.slope_ms
        # a decoding sequence: its new token attends to itself; its window and its state
        self._seq_ms = costs.slope_ms + costs.seq_attention_ms

    # -- pricing ---------------------------------------------------------------
    def _experts_ms(self, tokens: int) -> float:
        """The routed experts of a step: the FLOPs of every attention-DP rank's tokens
        (``tokens x dp``) against reading the experts they route to, in expectation (tokens
        spread uniformly: E (1 - (1 - k / E) ** tokens) distinct experts per layer)."""
        m, c = self.model, self.costs
        if not m.num_experts:
            return 0.0
        group = tokens * self.layout.dp
        touched = c.local_experts * (1.0 - (1.0 - m.experts_per_token / m.num_experts) ** group)
        return max(c.expert_flop_ms * group, c.expert_bytes_ms * touched)

    def _base(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        prefill_seqs: int,
        prefill_pairs: float,
        prefill_context: int,
    ) -> float:
        """Everything but the decode sequences' context term."""
        tokens = prefill_tokens + decode_seqs
        if tokens == 0:
            return 0.0
        c = self.costs
        sampled = decode_seqs + prefill_seqs
        ms = self._overhead_ms + self._per_seq_ms * sampled
        ms += max(c.dense_flop_ms * tokens, c.dense_bytes_ms)
        ms += self._experts_ms(tokens)
        ms += max(c.lm_flop_ms * sampled, c.lm_bytes_ms)
        if prefill_tokens:
            ms += max(c.pair_ms * prefill_pairs, c.kv_ms * (prefill_context + prefill_tokens))
            if c.sliding_pair_ms:
                window = min(prefill_pairs, prefill_tokens * self.model.sliding_window)
                ms += c.sliding_pair_ms * window
        ms += self._seq_ms * decode_seqs
        if c.linear_token_ms:
            ms += c.linear_token_ms * tokens
        ms += c.comm_token_ms * tokens + c.comm_fixed_ms
        return ms

    def price_step(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        context_tokens: int,
        prefill_seqs: int,
        prefill_pairs: float,
        prefill_context: int,
    ) -> float:
        return (
            self._base(prefill_tokens, decode_seqs, prefill_seqs, prefill_pairs, prefill_context)
            + self._slope * context_tokens
        )

    def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        """Without the prefill's shape: one chunk from the start of its prompt."""
        prefill_seqs = 1 if prefill_tokens else 0
        pairs = prefill_tokens * (prefill_tokens + 1) / 2
        return self.price_step(prefill_tokens, decode_seqs, context_tokens, prefill_seqs, pairs, 0)

    def frontend_service_ms(self, prompt_tokens: int, output_tokens: int) -> float:
        return self._frontend_request_ms + self._frontend_token_ms * output_tokens

    @property
    def serial_frontend(self) -> bool:
        return bool(self._frontend_request_ms or self._frontend_token_ms)

    def decode_durations(self, seqs: int, context: int, k: int) -> Iterator[float]:
        base = self._base(0, seqs, 0, 0, 0)
        contexts: Any = range(context, context + k * seqs, seqs) if seqs else repeat(context, k)
        return map(add, repeat(base), map(mul, repeat(self._slope), contexts))

    # -- memory ----------------------------------------------------------------
    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.costs.weight_bytes

    @property
    def gpu_memory_bytes(self) -> float:
        """The memory CUDA reports: a datasheet's "80 GB" are GiB, of which the
        driver keeps about 1 % (an H100 80GB shows 79.19 GiB in vLLM's start-up
        log, an H200 141GB ~139.5 GiB free in SGLang's)."""
        return self.gpu.memory_gb * 2**30 * CUDA_VISIBLE_MEMORY

    def to_json(self) -> dict[str, Any]:
        """A ``timing`` section that builds this model again, every factor resolved
        (the catalogue key of the model and GPU, dtypes, layout, efficiencies)."""
        gpu = self.options["gpu"] if not isinstance(self.options["gpu"], str) else self.gpu.key
        return {
            "name": self.name,
            "options": {
                "model": self.model.key,
                "gpu": gpu,
                "dtype": self.dtype,
                "kv_cache_dtype": self.kv_cache_dtype,
                "tensor_parallel_size": self.tp,
                **self._layout_json(),
                "engine": self.engine,
                **{k: self.factors[k] for k in FACTORS},
            },
        }

    def _layout_json(self) -> dict[str, Any]:
        """The layout and expert format, where they differ from a plain TP deployment."""
        lay, out = self.layout, {}
        if self.moe_dtype != self.dtype:
            out["moe_dtype"] = self.moe_dtype
        if lay.pp > 1:
            out["pipeline_parallel_size"] = lay.pp
        if lay.dp > 1:
            out["attention_dp_size"] = lay.dp
        if (lay.moe_tp, lay.moe_ep) != (lay.tp * lay.dp, 1):
            out["moe_tensor_parallel_size"] = lay.moe_tp
            out["moe_expert_parallel_size"] = lay.moe_ep
        return out


def _layout(options: Mapping[str, Any], model: ModelSpec) -> Layout:
    """The options' layout; the experts split over every GPU of the DP group by tensor
    parallelism unless ``moe_*`` say otherwise (vLLM's and SGLang's default without expert
    parallelism). ``moe_tp x moe_ep`` must be ``tp x dp``: the experts live on the GPUs the
    attention ranks run on."""
    tp = int(options.get("tensor_parallel_size", 1))
    pp = int(options.get("pipeline_parallel_size", 1))
    dp = int(options.get("attention_dp_size", 1))
    ep_option, tp_option = options.get("moe_expert_parallel_size"), options.get("moe_tensor_parallel_size")
    if ep_option is None and tp_option is None:
        ep, moe_tp = 1, tp * dp
    elif tp_option is not None and ep_option is None:
        moe_tp = int(tp_option)
        ep = max(1, tp * dp // moe_tp)
    else:
        ep = int(ep_option or 1)
        moe_tp = int(tp_option) if tp_option is not None else max(1, tp * dp // ep)
    if moe_tp * ep != tp * dp:
        raise ConfigError(
            f"moe_tensor_parallel_size {moe_tp} x moe_expert_parallel_size {ep} must be "
            f"tensor_parallel_size {tp} x attention_dp_size {dp} = {tp * dp}",
            option="moe_expert_parallel_size",
        )
    if model.num_experts and model.num_experts % ep:
        raise ConfigError(
            f"moe_expert_parallel_size {ep} does not divide the model's {model.num_experts} experts",
            option="moe_expert_parallel_size",
        )
    return Layout(tp=tp, pp=pp, dp=dp, moe_tp=moe_tp, moe_ep=ep)
