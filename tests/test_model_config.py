"""A model's Hugging Face config.json, as the roofline timing model reads it (issue 32): checked
against schemas/model-config.schema.json (positive integer sizes, integer counts of the optional
parts, extra keys kept) and for fields that contradict each other. 0 attention heads,
``hidden_size: 0``, negative or fractional sizes were a ``ZeroDivisionError`` naming no file or a
nonsense step time; each is now one line naming the config file, the line and the JSON path,
exit 2. Every real config (fixtures/realdata/measured/models) passes. A GPU given by its figures
in the policy has positive ones, checked by the roofline's options schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from tickgate.timing.hf_config import model_from_hf_config
from tickgate.timing.models import lookup_model
from tickgate.util.errors import ConfigError
from tickgate.util.schemas import load_schema, validate

MODELS = FIXTURES / "realdata" / "measured" / "models"
REAL = sorted(MODELS.glob("*_config.json"))
LLAMA = MODELS / "meta-llama--Meta-Llama-3.1-8B_config.json"
QWEN_VL = MODELS / "Qwen--Qwen3.5-397B-A17B_config.json"


def test_the_real_configs_are_all_here() -> None:
    assert len(REAL) == 11


@pytest.mark.parametrize("path", REAL, ids=[p.name.removesuffix("_config.json") for p in REAL])
def test_every_real_config_passes_the_schema_and_builds(path: Path) -> None:
    config = json.loads(path.read_text(encoding="utf-8"))
    validate(config, load_schema("model-config.schema.json"), file=path)
    model = lookup_model(str(path))
    assert model.num_layers > 0 and model.hidden_size > 0 and model.head_dim > 0
    assert 0 < model.num_kv_heads <= model.num_attention_heads
    assert 0 < model.active_params <= model.weight_params


def _policy(tmp_path: Path, model: str) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\n"
        "scheduler:\n  name: vllm-v1\n"
        "  options: {block_size: 16, num_gpu_blocks: auto, max_num_seqs: 64, max_num_batched_tokens: 2048}\n"
        f"timing:\n  name: roofline\n  options: {{model: {model}, gpu: H100-SXM-80GB}}\n",
        encoding="utf-8",
    )
    return policy


def _config(tmp_path: Path, source: Path, change: dict[str, object], inner: bool = False) -> Path:
    data = json.loads(source.read_text(encoding="utf-8"))
    target = data["text_config"] if inner else data
    for key, value in change.items():
        if value is ...:
            del target[key]
        else:
            target[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _line_of(path: Path, key: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(f'"{key}"'))


CASES = [
    ({"num_attention_heads": 0}, "num_attention_heads", "0 is less than the minimum of 1"),
    ({"hidden_size": 0}, "hidden_size", "0 is less than the minimum of 1"),
    ({"intermediate_size": -14336}, "intermediate_size", "-14336 is less than the minimum of 1"),
    ({"num_hidden_layers": 32.5}, "num_hidden_layers", "32.5 is not null or an integer from 1 to 2147483647"),
    ({"num_hidden_layers": 32.0}, "num_hidden_layers", "32.0 is not null or an integer from 1 to 2147483647"),
    ({"vocab_size": "128256"}, "vocab_size", "'128256' is not null or an integer from 1 to 2147483647"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings", "'false' is not of type 'boolean'"),
    ({"num_key_value_heads": 64}, "num_key_value_heads", "num_key_value_heads 64 is more than num_attention_heads 32"),
    ({"hidden_size": 16}, "hidden_size",
     "hidden_size 16 is smaller than num_attention_heads 32, and no head_dim says how wide a head is"),
    ({"num_local_experts": 4, "num_experts_per_tok": 8}, "num_experts_per_tok",
     "num_experts_per_tok 8 is more than the model's 4 experts (num_local_experts)"),
    ({"n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 40}, "first_k_dense_replace",
     "first_k_dense_replace 40 is more than num_hidden_layers 32"),
]


@pytest.mark.parametrize("change,key,message", CASES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(CASES)])
def test_a_bad_config_is_one_line_naming_the_file_and_path(tmp_path: Path, change: dict[str, object], key: str,
                                                           message: str) -> None:
    config = _config(tmp_path, LLAMA, change)
    res = run_cli("validate", str(_policy(tmp_path, str(config))))
    assert res.returncode == 2, res.stdout
    assert res.stderr == f"error: {config}:{_line_of(config, key)}:3: $.{key}: {message}\n"


def test_a_language_model_under_text_config_is_located_there(tmp_path: Path) -> None:
    config = _config(tmp_path, QWEN_VL, {"num_attention_heads": 0}, inner=True)
    res = run_cli("validate", str(_policy(tmp_path, str(config))))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {config}:")
    assert ": $.text_config.num_attention_heads: 0 is less than the minimum of 1" in res.stderr


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", ":1: expected a JSON object (a Hugging Face config.json)"),
    ('{"hidden_size": NaN}', ":1:17: $.hidden_size: invalid JSON: NaN is not valid JSON"),
    ('{"hidden_size": 8, "num_attention_heads": 1}', ":1:1: $: has no integer num_hidden_layers / n_layer / num_layers"),
])
def test_a_config_that_is_no_model_is_named(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(text, encoding="utf-8")
    res = run_cli("validate", str(_policy(tmp_path, str(config))))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr == f"error: {config}{message}\n"


def test_a_replay_and_a_timing_check_name_the_config_too(tmp_path: Path) -> None:
    """Both were a ZeroDivisionError (exit 3) on a config with 0 heads; an output already there stays."""
    config = _config(tmp_path, LLAMA, {"num_attention_heads": 0})
    where = f"error: {config}:{_line_of(config, 'num_attention_heads')}:3: $.num_attention_heads: "
    out = tmp_path / "out.json"
    out.write_text("before\n")
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--policy",
                  str(_policy(tmp_path, str(config))), "--output", str(out))
    assert res.returncode == 2 and res.stderr.startswith(where), res.stderr
    points = tmp_path / "points.jsonl"
    points.write_text(json.dumps({"id": "p", "engine": "vllm", "model_key": str(config), "gpu_key": "H100-SXM-80GB",
                                  "workload": {"isl": 128, "osl": 16, "num_requests": 10},
                                  "measured": {"ttft_ms_mean": 12.5}}) + "\n")
    res = run_cli("timing", "check", str(points), "--output", str(out))
    assert res.returncode == 2 and res.stderr.startswith(where), res.stderr
    assert out.read_text() == "before\n"


def test_a_config_given_in_code_is_checked_the_same() -> None:
    config = json.loads(LLAMA.read_text(encoding="utf-8"))
    assert model_from_hf_config(config).num_attention_heads == 32
    with pytest.raises(ConfigError, match=r"model 'config.json': config.json \$.num_attention_heads: 0 is less"):
        model_from_hf_config({**config, "num_attention_heads": 0})


def test_a_layout_given_as_a_word_is_refused_in_a_policy(tmp_path: Path) -> None:
    """``tensor_parallel_size: "four"`` (and ``tp: "four"`` in a timing point: test_timing_points_input)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(_policy(tmp_path, "llama-3.1-8b").read_text().replace(
        "gpu: H100-SXM-80GB}", 'gpu: H100-SXM-80GB, tensor_parallel_size: "four"}'))
    res = run_cli("validate", str(policy))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {policy}:7:")
    assert "$.timing.options.tensor_parallel_size: 'four' is not of type 'integer'" in res.stderr


@pytest.mark.parametrize("figures,message", [
    ("hbm_bandwidth_GBps: 0, bf16_dense_tflops: 900", "hbm_bandwidth_GBps: 0 is less than or equal to the minimum of 0"),
    ("hbm_bandwidth_GBps: 3000, bf16_dense_tflops: 0", "bf16_dense_tflops: 0 is less than or equal to the minimum of 0"),
    ("hbm_bandwidth_GBps: 3000, bf16_dense_tflops: fast", "bf16_dense_tflops: 'fast' is not null or a number"),
    ("hbm_bandwidth_GBps: .nan, bf16_dense_tflops: 900", "hbm_bandwidth_GBps: nan is not a finite number"),
])
def test_a_gpu_given_by_its_figures_has_positive_peaks(tmp_path: Path, figures: str, message: str) -> None:
    """A bandwidth or peak of 0 was a ZeroDivisionError naming no place."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(_policy(tmp_path, "llama-3.1-8b").read_text().replace(
        "gpu: H100-SXM-80GB}", f"gpu: {{memory_gb: 80, {figures}}}}}"))
    res = run_cli("validate", str(policy))
    assert res.returncode == 2, res.stdout
    assert res.stderr.startswith(f"error: {policy}:7:") and f"$.timing.options.gpu.{message}\n" in res.stderr
