"""KV capacity from GPU memory, as the engines size their pools at start-up.

Each engine measures what is left after loading the weights and profiling one
forward pass, and gives a fraction of it to the KV cache. tickgate cannot
profile, so the activation peak is estimated from the step's token budget
(docs/timing.md, "KV capacity from memory"):

* vLLM (``gpu_worker.determine_available_memory``): ``total * gpu_memory_utilization``
  minus weights, the profiled activation peak and non-torch memory (NCCL, CUDA
  graphs);
* SGLang (``ModelRunner.profile_max_num_token``): ``total * mem_fraction_static``
  minus weights (its static fraction is meant to cover weights and KV; the
  rest is left for activations);
* TensorRT-LLM (``KvCacheConfig.free_gpu_memory_fraction``): that fraction of
  the memory still free once weights and runtime buffers are allocated.

:func:`kv_capacity` gives the figure with its parts (what a scheduler shows in
its report); :func:`kv_cache_tokens` only the tokens.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..util.errors import ConfigError

__all__ = ["KvCapacity", "activation_bytes", "kv_cache_tokens", "kv_capacity"]

#: memory outside the weights, activations and KV cache: CUDA context, NCCL
#: buffers, CUDA graphs (vLLM's "non-torch" memory); a round figure
NON_TORCH_BYTES = 1.5e9
#: what the timing model must know for a capacity from memory (``model``: its shape, a
#: :class:`~tickgate.timing.models.ModelSpec`, for the activation estimate; ``tp``: ranks)
_NEEDS = ("weight_bytes_per_gpu", "gpu_memory_bytes", "kv_token_bytes", "model", "tp")
ENGINES = ("vllm", "sglang", "trtllm")


def activation_bytes(timing: Any, step_tokens: int, step_seqs: int = 1024) -> float:
    """The activation peak of profiling one step of ``step_tokens`` tokens for
    ``step_seqs`` sequences, per GPU: the larger of

    * the forward pass: per token, the residual stream (hidden states and
      residual, 2 x hidden) and the MLP's widest moment, its gate and up
      projections (2 x intermediate / tp) alive with their activated product
      (intermediate / tp), as vLLM's ``MergedColumnParallelLinear`` and
      ``SiluAndMul`` allocate them, in 16 bits (MoE: the routed experts' width);
    * the sampler run after it: the hidden states still held, plus the logits of
      ``min(step_tokens, step_seqs)`` rows (vLLM profiles ``max_num_seqs``
      sampled rows) over the whole vocabulary, in 16 bits from ``compute_logits``
      and their fp32 copy in the sampler. Not divided by tp: the vocab-parallel
      logits are gathered whole on the first rank, and the pool is sized from
      the rank with the least memory left."""
    m = timing.model
    tp = timing.tp
    width = max(m.intermediate_size, m.moe_intermediate_size * max(1, m.experts_per_token))
    forward = step_tokens * (3 * width // tp + 2 * m.hidden_size) * 2
    rows = min(step_tokens, step_seqs)
    sampler = step_tokens * m.hidden_size * 2 + rows * m.vocab_size * (2 + 4)
    return float(max(forward, sampler))


@attrs.frozen
class KvCapacity:
    """The KV pool one engine would allocate per GPU, with the figures it came from (bytes)."""

    engine: str
    fraction: float
    #: tokens of KV cache per GPU (all layers): ``kv_bytes // kv_token_bytes``
    tokens: int
    gpu_memory_bytes: float
    weight_bytes: float
    #: the estimated activation peak and non-torch memory (0 where the engine's formula has none)
    activation_bytes: float
    non_torch_bytes: float
    #: memory given to the KV cache
    kv_bytes: float
    kv_token_bytes: int

    def summary(self, fraction_name: str) -> dict[str, Any]:
        """The report's ``kv_capacity`` figures, in GB (1e9 bytes), the fraction under
        the engine's own option name; a scheduler adds its pool (``tokens``, blocks)."""

        def gb(value: float) -> float:
            return round(value / 1e9, 3)

        out: dict[str, Any] = {
            "source": "auto",
            fraction_name: self.fraction,
            "gpu_memory_gb": gb(self.gpu_memory_bytes),
            "weights_gb_per_gpu": gb(self.weight_bytes),
        }
        if self.engine != "sglang":  # SGLang's formula reserves none: its static fraction leaves the rest
            out["activation_gb"] = gb(self.activation_bytes)
            out["non_torch_gb"] = gb(self.non_torch_bytes)
        out["kv_gb"] = gb(self.kv_bytes)
        out["kv_bytes_per_token"] = self.kv_token_bytes
        return out


def kv_capacity(
    timing: Any,
    engine: str,
    fraction: float,
    *,
    step_tokens: int = 8192,
    step_seqs: int = 1024,
    option: str | None = None,
) -> KvCapacity:
    """The KV pool per GPU that ``engine`` ("vllm", "sglang" or "trtllm") would
    allocate with its memory ``fraction`` under ``timing``, a model that knows
    its memory (``weight_bytes_per_gpu``, ``gpu_memory_bytes``,
    ``kv_token_bytes``, ``model``, ``tp``, such as roofline). ``step_tokens`` / ``step_seqs``: the
    step the engine profiles (vLLM's ``max_num_batched_tokens`` and
    ``max_num_seqs``). ``option`` names the scheduler option that asked (``"num_gpu_blocks"``)
    in the :class:`~tickgate.util.errors.ConfigError` for a timing model that does not know."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: not one of {', '.join(ENGINES)}")
    if timing is None or not all(hasattr(timing, need) for need in _NEEDS):
        asked = f"{option}: auto" if option else "KV capacity from memory"
        which = (
            "there is no timing section"
            if timing is None
            else f"timing model {getattr(timing, 'name', type(timing).__name__)!r} does not"
        )
        raise ConfigError(
            f"{asked} needs a timing model that knows the model and GPU "
            f"(timing: {{name: roofline, options: {{model: ..., gpu: ...}}}}); {which}"
        )
    total = float(timing.gpu_memory_bytes)
    weights = float(timing.weight_bytes_per_gpu)
    activation = non_torch = 0.0
    if engine in ("vllm", "trtllm"):
        activation = activation_bytes(timing, step_tokens, step_seqs)
        non_torch = NON_TORCH_BYTES
    if engine == "vllm":
        free = total * fraction - weights - activation - non_torch
    elif engine == "sglang":
        free = total * fraction - weights
    else:
        free = (total - weights - activation - non_torch) * fraction
    tokens = int(free // timing.kv_token_bytes) if free > 0 else 0
    if tokens <= 0:
        model = getattr(timing.model, "key", "the model")
        gpu = getattr(getattr(timing, "gpu", None), "key", "the GPU")
        raise ConfigError(
            f"no memory left for the KV cache: {model} needs {weights / 1e9:.1f} GB "
            f"of weights per GPU on {gpu} ({total / 1e9:.0f} GB) at memory "
            f"fraction {fraction}"
        )
    return KvCapacity(
        engine=engine,
        fraction=fraction,
        tokens=tokens,
        gpu_memory_bytes=total,
        weight_bytes=weights,
        activation_bytes=activation,
        non_torch_bytes=non_torch,
        kv_bytes=free,
        kv_token_bytes=int(timing.kv_token_bytes),
    )


def kv_cache_tokens(
    timing: Any, engine: str, fraction: float, *, step_tokens: int = 8192, step_seqs: int = 1024
) -> int:
    """Tokens of KV cache per GPU (all layers) that ``engine`` would allocate with
    its memory ``fraction`` under ``timing`` (:func:`kv_capacity`'s ``tokens``)."""
    return kv_capacity(timing, engine, fraction, step_tokens=step_tokens, step_seqs=step_seqs).tokens
