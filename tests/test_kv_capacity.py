"""KV capacity from GPU memory (issue 20, ``tickgate.kv_capacity``): the engines'
formulas worked by hand from the catalogue's figures (docs/timing.md, "KV
capacity from memory"), independently of the code's helpers."""

from __future__ import annotations

import pytest

from tickgate import ConfigError, LinearTiming, kv_cache_tokens, kv_capacity
from tickgate.timing.catalogue import catalogue
from tickgate.timing.roofline import RooflineTiming

LLAMA_8B = catalogue()["models"]["llama-3.1-8b"]
H100 = catalogue()["gpus"]["H100-SXM-80GB"]


def roofline(**options: object) -> RooflineTiming:
    return RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", **options})


def by_hand_8b(engine: str, fraction: float, step_tokens: int = 8192, step_seqs: int = 1024,
               tp: int = 1) -> int:
    """The pool of llama-3.1-8b on one H100-SXM-80GB, from the catalogue entry's own figures."""
    total = H100["memory_gb"] * 2**30 * 0.99            # 80 GiB, 1 % kept by the driver
    weights = LLAMA_8B["num_params"] * 2 / tp            # bf16: 8 030 261 248 parameters
    kv_token = LLAMA_8B["kv_cache_bytes_per_token_bf16"] // tp  # 131 072: 2 x 32 layers x 8 heads x 128 x 2
    h, inter, vocab = 4096, 14336, 128256
    forward = step_tokens * (3 * inter // tp + 2 * h) * 2
    sampler = step_tokens * h * 2 + min(step_tokens, step_seqs) * vocab * 6
    activation = max(forward, sampler)
    if engine == "vllm":
        free = total * fraction - weights - activation - 1.5e9
    elif engine == "sglang":
        free = total * fraction - weights
    else:
        free = (total - weights - activation - 1.5e9) * fraction
    return int(free // kv_token)


def test_the_catalogue_figures_are_what_the_roofline_model_holds() -> None:
    timing = roofline()
    # 80 GiB as CUDA sees them: 80 x 1 073 741 824 x 0.99 = 85 040 352 460.8 bytes (79.2 GiB)
    assert H100["memory_gb"] == 80
    assert timing.gpu_memory_bytes == pytest.approx(85_040_352_460.8, abs=1e-3)
    assert timing.weight_bytes_per_gpu == LLAMA_8B["num_params"] * 2
    assert timing.kv_token_bytes == LLAMA_8B["kv_cache_bytes_per_token_bf16"] == 131072


@pytest.mark.parametrize("engine, fraction", [("vllm", 0.9), ("sglang", 0.88), ("trtllm", 0.9)])
def test_llama_8b_on_an_h100_gets_the_documented_pool(engine: str, fraction: float) -> None:
    cap = kv_capacity(roofline(), engine, fraction)
    assert cap.tokens == by_hand_8b(engine, fraction)
    assert kv_cache_tokens(roofline(), engine, fraction) == cap.tokens
    # total 85 040 352 460.8, weights 16 060 522 496, sampler peak 8192 x 4096 x 2 + 1024 x 128 256 x 6
    # = 855 113 728 (above the forward pass's 838 860 800), non-torch 1.5e9; bytes -> tokens of 131 072:
    # vLLM   85 040 352 460.8 x 0.9 - 16 060 522 496 - 855 113 728 - 1.5e9 = 58 120 680 990.72 -> 443 425
    # SGLang 85 040 352 460.8 x 0.88 - 16 060 522 496 = 58 774 987 669.504 -> 448 417
    # TRT    (85 040 352 460.8 - 16 060 522 496 - 855 113 728 - 1.5e9) x 0.9 = 59 962 244 613.12 -> 457 475
    assert cap.tokens == {"vllm": 443_425, "sglang": 448_417, "trtllm": 457_475}[engine]
    assert cap.kv_bytes // cap.kv_token_bytes == cap.tokens


def test_vllm_profiles_its_step_budget_and_sampled_rows() -> None:
    """A bigger step budget reserves more activation memory: fewer KV tokens. At
    8192 tokens and 256 sequences the forward pass is the peak (839 MB); at 1024
    sequences the sampler's logits are (2 + 4 bytes x 1024 x 128 256 + hidden states)."""
    small = kv_capacity(roofline(), "vllm", 0.9, step_tokens=2048, step_seqs=256)
    big = kv_capacity(roofline(), "vllm", 0.9, step_tokens=16384, step_seqs=256)
    assert small.tokens > big.tokens
    assert big.tokens == by_hand_8b("vllm", 0.9, 16384, 256)
    assert kv_capacity(roofline(), "vllm", 0.9, step_seqs=256).activation_bytes == 8192 * 51200 * 2
    assert kv_capacity(roofline(), "vllm", 0.9).activation_bytes == 8192 * 4096 * 2 + 1024 * 128256 * 6


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_higher_fraction_gives_a_bigger_pool(engine: str) -> None:
    pools = [kv_capacity(roofline(), engine, f).tokens for f in (0.5, 0.7, 0.9, 0.95)]
    assert pools == sorted(pools) and len(set(pools)) == 4


def test_tensor_parallel_splits_weights_and_kv_heads() -> None:
    one, two = roofline(), roofline(tensor_parallel_size=2)
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2)
    assert two.kv_token_bytes == one.kv_token_bytes // 2
    assert kv_capacity(two, "vllm", 0.9).tokens == by_hand_8b("vllm", 0.9, tp=2)


def test_without_a_timing_model_that_knows_memory_it_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"num_gpu_blocks: auto needs a timing model that knows the model "
                                          r"and GPU \(timing: \{name: roofline.*there is no timing section"):
        kv_capacity(None, "vllm", 0.9, option="num_gpu_blocks")
    with pytest.raises(ConfigError, match="timing model 'linear' does not"):
        kv_capacity(LinearTiming.build({"fixed_ms": 1.0}), "sglang", 0.9, option="max_total_tokens")


def test_weights_that_do_not_fit_are_a_config_error() -> None:
    timing = RooflineTiming({"model": "llama-3.1-405b", "gpu": "H100-SXM-80GB"})
    with pytest.raises(ConfigError, match=r"no memory left for the KV cache: llama-3.1-405b needs 8\d\d\.\d"):
        kv_capacity(timing, "vllm", 0.9)


def test_the_summary_names_the_engines_fraction_and_shows_its_parts() -> None:
    """In GB of 1e9 bytes: the CUDA-visible total (80 GiB x 0.99 = 85.04e9 bytes), not the datasheet's 80."""
    vllm = kv_capacity(roofline(), "vllm", 0.9).summary("gpu_memory_utilization")
    assert vllm == {"source": "auto", "gpu_memory_utilization": 0.9, "gpu_memory_gb": 85.04,
                    "weights_gb_per_gpu": 16.061, "activation_gb": 0.855, "non_torch_gb": 1.5,
                    "kv_gb": 58.121, "kv_bytes_per_token": 131072}
    sglang = kv_capacity(roofline(), "sglang", 0.88).summary("mem_fraction_static")
    assert "activation_gb" not in sglang and sglang["kv_gb"] == 58.775 and sglang["gpu_memory_gb"] == 85.04
