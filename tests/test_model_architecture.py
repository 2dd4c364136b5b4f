"""Models by architecture (MoE, MLA, hybrid layers, quantized checkpoints) and parallel layouts,
read from the real config.json files of the silicon slice (fixtures/realdata/measured/silicon)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickgate.timing.models import lookup_model
from tickgate.timing.roofline import RooflineTiming
from tickgate.util.errors import ConfigError, InputError

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "realdata" / "measured" / "silicon" / "models"
DEEPSEEK = MODELS / "deepseek-ai--DeepSeek-R1_config.json"
DEEPSEEK_NVFP4 = MODELS / "nvidia--DeepSeek-V3.1-NVFP4_config.json"
GPT_OSS = MODELS / "openai--gpt-oss-120b_config.json"
QWEN35 = MODELS / "Qwen--Qwen3.5-397B-A17B_config.json"
LLAMA70 = MODELS / "meta-llama--Meta-Llama-3.1-70B_config.json"


def timing(model: Path, **options: object) -> RooflineTiming:
    return RooflineTiming({"model": str(model), "gpu": "H200-SXM-141GB", **options})


def test_deepseek_reads_as_mla_moe_with_its_published_size() -> None:
    m = lookup_model(str(DEEPSEEK))
    assert m.mla and (m.kv_lora_rank, m.qk_rope_head_dim) == (512, 64)
    assert (m.num_experts, m.experts_per_token, m.first_moe_layer) == (256, 8, 3)
    # DeepSeek-V3/R1: 671 B parameters (its model card), 37 B activated with the embedding
    assert m.weight_params == pytest.approx(671e9, rel=0.01)
    assert 34e9 < m.active_params < 38e9
    # the latent cache: one (512 + 64)-wide vector per layer and token, not 128 heads of K and V
    assert m.kv_bytes_per_token(2) == 61 * 576 * 2
    q = m.quantization
    assert q is not None and (q.gemm, q.moe) == ("fp8_block", "fp8_block")


def test_mla_cache_is_replicated_on_every_tensor_parallel_rank() -> None:
    one, eight = timing(DEEPSEEK, tensor_parallel_size=1), timing(DEEPSEEK, tensor_parallel_size=8)
    assert one.kv_token_bytes == eight.kv_token_bytes == 61 * 576 * 2
    # GQA splits its KV heads instead
    dense1, dense8 = timing(LLAMA70, tensor_parallel_size=1), timing(LLAMA70, tensor_parallel_size=8)
    assert dense1.kv_token_bytes == 8 * dense8.kv_token_bytes


def test_gpt_oss_alternates_sliding_and_full_layers_and_quantizes_only_its_experts() -> None:
    m = lookup_model(str(GPT_OSS))
    assert (m.full_layers, m.sliding_layers, m.sliding_window) == (18, 18, 128)
    assert m.weight_params == pytest.approx(116.8e9, rel=0.01)  # "117B" in its model card
    # only the full layers keep every token (vLLM's hybrid allocator frees a window's blocks)
    assert m.kv_bytes_per_token(2) == 2 * 18 * 8 * 64 * 2
    t = timing(GPT_OSS, tensor_parallel_size=2)
    assert (t.dtype, t.moe_dtype) == ("bf16", "mxfp4")
    # a sliding layer's decode costs its window, a constant per sequence; the context slope
    # is that of the 18 full layers alone (half what 36 full layers would cost)
    assert t.costs.seq_attention_ms > 0
    as_full = RooflineTiming(
        {"model": str(_config_all_full()), "gpu": "H200-SXM-141GB", "tensor_parallel_size": 2}
    )
    assert t.costs.slope_ms == pytest.approx(as_full.costs.slope_ms / 2)


def test_qwen35_linear_attention_layers_hold_state_not_kv() -> None:
    m = lookup_model(str(QWEN35))
    assert (m.linear_layers, m.full_layers) == (45, 15)
    assert m.kv_bytes_per_token(2) == 2 * 15 * 2 * 256 * 2
    t = timing(QWEN35, tensor_parallel_size=8)
    # each decoding sequence reads and writes its recurrent state once per step
    assert t.costs.seq_attention_ms > 0 and t.costs.linear_token_ms > 0
    assert t.step_ms(0, 64, 0) > t.step_ms(0, 32, 0)


def test_nvfp4_runs_at_the_fp4_peak_where_the_gpu_has_one() -> None:
    m = lookup_model(str(DEEPSEEK_NVFP4))
    q = m.quantization
    assert q is not None and (q.gemm, q.moe, q.attention, q.kv_cache) == ("nvfp4", "nvfp4", "bf16", "fp8")
    b200 = RooflineTiming({"model": str(DEEPSEEK_NVFP4), "gpu": "B200", "tensor_parallel_size": 8})
    b200_fp8 = RooflineTiming(
        {"model": str(DEEPSEEK_NVFP4), "gpu": "B200", "tensor_parallel_size": 8, "dtype": "fp8", "moe_dtype": "fp8"}
    )
    h200 = RooflineTiming({"model": str(DEEPSEEK_NVFP4), "gpu": "H200", "tensor_parallel_size": 8})
    # 8 k prompt tokens are compute-bound: fp4 is faster than fp8 on Blackwell ...
    assert b200.step_ms(8192, 0, 0) < b200_fp8.step_ms(8192, 0, 0)
    # ... and Hopper, without fp4 tensor cores, runs the nvfp4 experts at its bf16 peak
    assert h200.costs.expert_flop_ms > b200.costs.expert_flop_ms * 2
    # 4-bit weights: fewer bytes per GPU than the fp8 export
    assert b200.weight_bytes_per_gpu < 0.65 * b200_fp8.weight_bytes_per_gpu


def test_expert_parallel_with_attention_dp_prices_the_group_and_the_all_to_all() -> None:
    tp8 = timing(DEEPSEEK, tensor_parallel_size=8)
    dp8 = timing(DEEPSEEK, tensor_parallel_size=1, attention_dp_size=8, moe_expert_parallel_size=8)
    assert dp8.layout.moe_ep == 8 and dp8.layout.moe_tp == 1
    # every rank's tokens reach the experts: a rank's 32 tokens move 8 x 32 through them
    assert dp8._experts_ms(32) > dp8._experts_ms(4)
    assert dp8.costs.comm_token_ms > 0
    # a rank holds 32 of the 256 experts whole, tp8 a slice of all 256: the same bytes
    assert dp8.weight_bytes_per_gpu > 0.9 * tp8.weight_bytes_per_gpu


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"tensor_parallel_size": 1, "attention_dp_size": 3, "moe_expert_parallel_size": 3}, "does not divide"),
        ({"tensor_parallel_size": 4, "moe_tensor_parallel_size": 2, "moe_expert_parallel_size": 4}, "must be"),
    ],
)
def test_a_layout_that_cannot_hold_the_experts_is_refused(options: dict[str, int], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        timing(DEEPSEEK, **options)


def _config_all_full() -> Path:
    import tempfile

    config = json.loads(GPT_OSS.read_text())
    config["layer_types"] = ["full_attention"] * 36
    path = Path(tempfile.mkdtemp()) / "config.json"
    path.write_text(json.dumps(config))
    return path


def _config(tmp_path: Path, **changes: object) -> Path:
    config = json.loads(GPT_OSS.read_text())
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def test_an_unknown_layer_kind_is_a_located_error(tmp_path: Path) -> None:
    kinds = ["sliding_attention", "mamba"] * 18
    with pytest.raises(InputError) as err:
        lookup_model(str(_config(tmp_path, layer_types=kinds)))
    assert err.value.json_path == "$.layer_types" and "'mamba'" in str(err.value)
    assert err.value.line is not None


def test_an_unknown_quantization_is_a_located_error_not_sixteen_bits(tmp_path: Path) -> None:
    path = _config(tmp_path, quantization_config={"quant_method": "bitsandbytes"})
    with pytest.raises(InputError) as err:
        lookup_model(str(path))
    assert err.value.json_path == "$.quantization_config.quant_method"
    assert "bitsandbytes" in str(err.value)
