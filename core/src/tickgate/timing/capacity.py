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
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

__all__ = ["activation_bytes", "kv_cache_tokens"]

#: memory outside the weights, activations and KV cache: CUDA context, NCCL
#: buffers, CUDA graphs (vLLM's "non-torch" memory); a round figure
NON_TORCH_BYTES = 1.5e9


def activation_bytes(timing: Any, step_tokens: int) -> float:
    """The activation peak of a forward pass over ``step_tokens`` tokens, per GPU:
    the widest intermediate (the MLP's gate and up projections, 2 x intermediate
    / tp, in 16 bits) and a few hidden-size buffers per token, plus the logits of
    up to ``step_tokens`` rows in fp32 (vLLM's sampler profiles the largest batch)."""
    m = timing.model
    tp = timing.tp
    width = 2 * max(m.intermediate_size, m.moe_intermediate_size * max(1, m.experts_per_token)) // tp
    per_token = (width + 4 * m.hidden_size) * 2
    logits = min(step_tokens, 1024) * m.vocab_size * 4 / tp
    return step_tokens * per_token + logits


def kv_cache_tokens(timing: Any, engine: str, fraction: float, *, step_tokens: int = 8192) -> int:
    """Tokens of KV cache per GPU (all layers) that ``engine`` would allocate with
    its memory ``fraction`` under ``timing`` (a model that knows its memory:
    ``weight_bytes_per_gpu``, ``gpu_memory_bytes``, ``kv_token_bytes``)."""
    for need in ("weight_bytes_per_gpu", "gpu_memory_bytes", "kv_token_bytes"):
        if not hasattr(timing, need):
            raise ConfigError(f"KV capacity from memory needs a timing model that knows the model and the GPU "
                              f"(such as roofline); {getattr(timing, 'name', timing)!r} does not")
    total = timing.gpu_memory_bytes
    weights = timing.weight_bytes_per_gpu
    if engine == "vllm":
        free = total * fraction - weights - activation_bytes(timing, step_tokens) - NON_TORCH_BYTES
    elif engine == "sglang":
        free = total * fraction - weights
    elif engine == "trtllm":
        free = (total - weights - activation_bytes(timing, step_tokens) - NON_TORCH_BYTES) * fraction
    else:  # pragma: no cover - callers pass one of the three
        raise ValueError(engine)
    tokens = int(free // timing.kv_token_bytes)
    if tokens <= 0:
        raise ConfigError(f"no memory left for the KV cache: {timing.model.key} needs {weights / 1e9:.1f} GB "
                          f"of weights per GPU on {timing.gpu.key} ({total / 1e9:.0f} GB) at memory "
                          f"fraction {fraction}")
    return tokens
