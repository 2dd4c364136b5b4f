"""The roofline timing model and its catalogue: figures recomputed here from the
catalogue's own numbers, not from the model's code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickgate.util.errors import ConfigError, InputError
from tickgate.testing import run_cli
from tickgate.timing.catalogue import catalogue
from tickgate.timing.gpus import lookup_gpu
from tickgate.timing.models import lookup_model
from tickgate.timing.roofline import ENGINE_DEFAULTS, RooflineTiming

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "fixtures" / "realdata" / "measured"

#: every factor at a round value, overheads off: step times are pure rooflines
PURE = {"compute_efficiency": 1.0, "attention_efficiency": 1.0, "memory_efficiency": 1.0,
        "link_efficiency": 1.0, "allreduce_latency_us": 0.0, "step_overhead_ms": 0.0,
        "layer_overhead_us": 0.0, "per_seq_overhead_us": 0.0}


def test_the_catalogue_holds_every_model_and_gpu_of_the_measurements() -> None:
    facts = json.loads((MEASURED / "models_hardware.json").read_text())
    shipped = catalogue()
    assert shipped["models"] == facts["models"]
    # the catalogue adds GPUs and fields (tests/test_gpu_catalogue.py); the measurements' own keep
    # every figure they have there, or the pinned timing tables would move
    for section in ("gpus", "gpu_aliases"):
        for key, entry in facts[section].items():
            assert {field: shipped[section][key].get(field) for field in entry} == entry
    points = [json.loads(line) for line in (MEASURED / "points.jsonl").read_text().splitlines()]
    for p in points:
        assert lookup_model(p["model_key"]).key == p["model_key"]
        assert lookup_gpu(p["gpu_key"]).key in facts["gpus"]


@pytest.mark.parametrize("key", sorted(json.loads((MEASURED / "models_hardware.json").read_text())["models"]))
def test_parameter_counts_and_kv_bytes_match_the_catalogue(key: str) -> None:
    entry = catalogue()["models"][key]
    model = lookup_model(key)
    # Qwen3's per-head q/k norms (2 x head_dim per layer) are the only weights not counted
    assert model.weight_params == pytest.approx(entry["num_params"], rel=2e-5)
    assert model.kv_bytes_per_token(2) == entry["kv_cache_bytes_per_token_bf16"]


def test_names_and_aliases_resolve_and_unknown_ones_list_the_known() -> None:
    assert lookup_model("meta-llama/Llama-3.3-70B-Instruct").key == "llama-3.1-70b"
    assert lookup_model("META-LLAMA/llama-3.1-8b-instruct").key == "llama-3.1-8b"
    assert lookup_gpu("A100-unspecified").key == "A100-SXM4-80GB"
    with pytest.raises(ConfigError, match=r"unknown model 'gpt-5'.*known: .*llama-3.1-8b"):
        lookup_model("gpt-5")
    with pytest.raises(ConfigError, match=r"unknown GPU 'R200'.*H100-SXM-80GB"):
        lookup_gpu("R200")
    with pytest.raises(ConfigError, match="no fp8 tensor-core peak"):
        RooflineTiming({"model": "llama-3.1-8b", "gpu": "A100-SXM4-80GB", "dtype": "fp8"})


@pytest.mark.parametrize(("name", "key"), [
    ("H100", "H100-SXM-80GB"), ("h100 sxm", "H100-SXM-80GB"), ("NVIDIA H100-SXM5-80G", "H100-SXM-80GB"),
    ("H200", "H200-SXM-141GB"), ("L40S", "L40S-48GB"), ("A100-PCIe", "A100-PCIe-80GB"),
    ("A100 SXM", "A100-SXM4-80GB"),
])
def test_a_short_name_that_fits_one_gpu_is_that_gpu(name: str, key: str) -> None:
    """Issue 32: ``gpu: H100`` was unknown; it is the SXM part (an alias since the PCIe and NVL
    cards joined the catalogue: tests/test_gpu_catalogue.py)."""
    assert lookup_gpu(name).key == key


def test_a_short_name_that_fits_several_gpus_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError) as err:
        lookup_gpu("A100")
    assert str(err.value) == ("GPU 'A100' is ambiguous: it could be A100-PCIe-80GB or A100-SXM4-80GB; name one "
                              "of them, or the alias A100-80GB-unspecified (assumes A100-SXM4-80GB) or the alias "
                              "A100-unspecified (assumes A100-SXM4-80GB)")
    with pytest.raises(ConfigError, match="ambiguous: it could be A100-PCIe-80GB or A100-SXM4-80GB or "
                                          "H100-PCIe-80GB or H100-SXM-80GB"):
        lookup_gpu("80GB")


@pytest.mark.parametrize("name", ["B200-PCIe", "L40", "H100-SXM-94GB", "A100-NVL"])
def test_a_short_name_is_never_stretched_to_another_gpu(name: str) -> None:
    """Every word must fit: a PCIe B200 (not in the catalogue) is not the SXM one, nor an L40 an L40S."""
    with pytest.raises(ConfigError, match=f"unknown GPU '{name}'"):
        lookup_gpu(name)


def test_a_hugging_face_config_with_experts(tmp_path: Path) -> None:
    """Mixtral-8x7B's config: 2 of 8 experts per token, so a token multiplies
    through far fewer weights than the GPUs hold."""
    config = {"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = lookup_model(str(path))
    attention = 4096 * 4096 * 2 + 4096 * 1024 * 2
    expert = 3 * 4096 * 14336
    assert model.active_params == 32 * (attention + 2 * expert + 4096 * 8)
    assert model.weight_params == 32 * (attention + 8 * expert + 4096 * 8) + 2 * 32000 * 4096 + 65 * 4096
    # ~46.7B parameters, ~12.9B active per token (Mistral's figures)
    assert 46.6e9 < model.weight_params < 46.8e9 and 12.8e9 < model.active_params + 2 * 32000 * 4096 < 13.0e9
    # a step of one token reads 2 of 8 experts per layer, a big batch all of them
    timing = RooflineTiming({"model": str(path), "gpu": "H100-SXM-80GB", **PURE})
    assert timing.step_ms(0, 1, 0) < 0.45 * timing.step_ms(0, 256, 0)
    # a config file's mistake names the file and the JSON path (tests/test_model_config.py)
    with pytest.raises(InputError, match=r"bad\.json:1:1: \$: has no integer num_hidden_layers"):
        lookup_model(str(_write(tmp_path / "bad.json", {"hidden_size": 8, "num_attention_heads": 1})))


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_decode_at_batch_one_reads_the_weights_once() -> None:
    """Memory-bound: weights + the context's KV over HBM bandwidth (catalogue figures)."""
    t = RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", **PURE})
    context = 1000
    # the matmul weights in bf16: the non-embedding parameters without the 65
    # RMSNorm vectors, and the LM head (the embedding is read a row per token)
    weights = (6979584000 - 65 * 4096 + 128256 * 4096) * 2
    kv = 131072 * (context + 1)
    expected_ms = (weights + kv) / (3350e9) * 1000
    assert t.step_ms(0, 1, context) == pytest.approx(expected_ms, rel=1e-6)


def test_a_long_prefill_is_compute_bound() -> None:
    """8192 tokens from the start: 2 x params x tokens + causal attention FLOPs at the peak."""
    t = RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", **PURE})
    n = 8192
    body = 2 * (6979584000 - 65 * 4096) * n  # the non-embedding matmul weights (no RMSNorms)
    attention = 4 * 32 * 32 * 128 * n * (n + 1) / 2
    # one sampled row: reading the LM head outweighs its FLOPs
    head_ms = max(2 * 4096 * 128256 / 989.4e12, 4096 * 128256 * 2 / 3350e9) * 1000
    expected_ms = (body + attention) / 989.4e12 * 1000 + head_ms
    assert t.step_ms(n, 0, 0) == pytest.approx(expected_ms, rel=1e-3)


def test_tensor_parallel_splits_the_work_and_pays_for_all_reduce() -> None:
    one = RooflineTiming({"model": "llama-3.1-70b", "gpu": "H100-SXM-80GB", **PURE})
    four = RooflineTiming({"model": "llama-3.1-70b", "gpu": "H100-SXM-80GB", "tensor_parallel_size": 4, **PURE})
    assert four.step_ms(0, 1, 0) < one.step_ms(0, 1, 0) / 3.5
    # an all-reduce per attention and MLP block: 2 x 80 of them, ring over NVLink (450 GB/s a way)
    tokens = 4096
    ring = 2 * 80 * 2 * 3 / 4 * tokens * 8192 * 2 / 450e9 * 1000
    latency = {**PURE, "allreduce_latency_us": 10.0}
    slow = RooflineTiming({"model": "llama-3.1-70b", "gpu": "H100-SXM-80GB", "tensor_parallel_size": 4, **latency})
    assert slow.step_ms(tokens, 0, 0) - four.step_ms(tokens, 0, 0) == pytest.approx(160 * 0.010, rel=1e-9)
    assert four.step_ms(tokens, 0, 0) > one.step_ms(tokens, 0, 0) / 4 + ring * 0.999
    with pytest.raises(ConfigError, match="does not divide"):
        RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", "tensor_parallel_size": 3})


def test_fp8_halves_what_decode_reads_and_doubles_the_matmul_peak() -> None:
    bf16 = RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", **PURE})
    fp8 = RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", "dtype": "fp8",
                          "kv_cache_dtype": "fp8", **PURE})
    assert fp8.step_ms(0, 1, 0) == pytest.approx(bf16.step_ms(0, 1, 0) / 2, rel=0.08)  # the LM head stays bf16
    assert fp8.kv_token_bytes * 2 == bf16.kv_token_bytes


def test_more_efficient_kernels_and_less_overhead_are_faster() -> None:
    base = {"model": "llama-3.1-8b", "gpu": "H200-SXM-141GB"}
    slow = RooflineTiming({**base, "memory_efficiency": 0.5})
    fast = RooflineTiming({**base, "memory_efficiency": 0.9})
    assert fast.step_ms(0, 8, 8000) < slow.step_ms(0, 8, 8000)
    assert (RooflineTiming({**base, "step_overhead_ms": 3.0}).step_ms(0, 8, 8000)
            - RooflineTiming({**base, "step_overhead_ms": 1.0}).step_ms(0, 8, 8000)) == pytest.approx(2.0)
    for engine in ENGINE_DEFAULTS:
        model = RooflineTiming({**base, "engine": engine})
        assert model.to_json()["options"]["step_overhead_ms"] == ENGINE_DEFAULTS[engine]["step_overhead_ms"]


def test_price_step_knows_the_context_a_chunk_attends_over() -> None:
    t = RooflineTiming({"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", **PURE})
    chunk = 2048
    fresh = t.price_step(chunk, 0, 0, 1, chunk * (chunk + 1) // 2, 0)
    late = t.price_step(chunk, 0, 0, 1, chunk * 30000 + chunk * (chunk + 1) // 2, 30000)
    assert fresh == t.step_ms(chunk, 0, 0)
    # the same chunk after 30000 tokens of context attends over 15x the pairs
    assert late - fresh == pytest.approx(4 * 32 * 32 * 128 * chunk * 30000 / 989.4e12 * 1000, rel=1e-6)


def test_an_offline_replay_decides_as_the_untimed_one(tmp_path: Path) -> None:
    """Everything queued at t = 0: the clock never decides, so the steps are the untimed ones."""
    requests = [{"id": f"r{i}", "prompt_tokens": 100 + 37 * i, "max_output_tokens": 20 + 11 * i}
                for i in range(40)]
    workload = _write(tmp_path / "w.json", {"version": 1, "requests": requests})
    timed = _write(tmp_path / "wt.json", {"version": 1, "requests": [{**r, "arrival_ms": 0.0} for r in requests]})
    base = (REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml").read_text()  # a fixed pool: untimed works
    head = base[: base.index("\ntiming:") + 1]
    roofline = tmp_path / "roofline.yaml"
    roofline.write_text(head + "timing: {name: roofline, options: {model: llama-3.1-8b, gpu: H100-SXM-80GB}}\n")
    untimed = tmp_path / "untimed.yaml"
    untimed.write_text(head)
    reports = []
    for policy, w in ((untimed, workload), (roofline, timed)):
        out = tmp_path / f"{policy.stem}.json"
        trace = tmp_path / f"{policy.stem}.jsonl"
        res = run_cli("replay", "--input", str(w), "--policy", str(policy), "--output", str(out),
                      "--trace", str(trace))
        assert res.returncode == 0, res.stderr
        rows = [json.loads(line) for line in trace.read_text().splitlines()]
        reports.append(([{k: v for k, v in r.items() if k != "duration_ms"} for r in rows],
                        json.loads(out.read_text())))
    (steps_untimed, _), (steps_timed, report) = reports
    assert steps_untimed == steps_timed
    assert report["inputs"]["timing"]["name"] == "roofline"
    assert report["latency"]["busy_ms"] > 0


@pytest.mark.parametrize("options, where, message", [
    ("{model: llama-9, gpu: H100-SXM-80GB}", ":7:13: $.timing.options.model", "unknown model 'llama-9'"),
    ("{model: llama-3.1-8b, gpu: R200}", ":7:34: $.timing.options.gpu", "unknown GPU 'R200'"),
    ("{model: llama-3.1-8b, gpu: A100}", ":7:34: $.timing.options.gpu", "GPU 'A100' is ambiguous"),
    ("{model: llama-3.1-8b, gpu: A100-SXM4-80GB, dtype: fp8}", ":7:55: $.timing.options.dtype",
     "has no fp8 tensor-core peak"),
    ("{model: llama-3.1-8b, gpu: H100-SXM-80GB, tensor_parallel_size: 3}",
     ":7:54: $.timing.options.tensor_parallel_size", "does not divide"),
])
def test_refused_options_are_located_at_the_option(tmp_path: Path, options: str, where: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nscheduler:\n  name: vllm-v1\n  options: {block_size: 16, num_gpu_blocks: 64, "
                    "max_num_seqs: 8, max_num_batched_tokens: 512}\ntiming:\n  name: roofline\n"
                    f"  options: {options}\n")
    res = run_cli("validate", str(path))
    assert res.returncode == 2
    line = res.stderr.strip()
    assert line.startswith(f"error: {path}{where}: ") and message in line and len(res.stderr.splitlines()) == 1


def _policy_with_gpu(tmp_path: Path, gpu: str) -> Path:
    text = (REPO / "policies" / "vllm-v1-bench.yaml").read_text(encoding="utf-8")
    assert "gpu: H100-SXM-80GB" in text
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("gpu: H100-SXM-80GB", f"gpu: {gpu}"), encoding="utf-8")
    return path


def test_a_gpu_given_by_figures_refuses_a_misspelt_key(tmp_path: Path) -> None:
    """A typo in the NVLink field used to fall back to PCIe silently (TTFT 39x worse, validate ok)."""
    typo = _policy_with_gpu(tmp_path, "{memory_gb: 80, hbm_bandwidth_GBps: 3350, bf16_dense_tflops: 989.4, "
                                      "nvlnk_bandwidth_GBps: 900}")
    res = run_cli("validate", str(typo))
    assert res.returncode == 2
    assert "$.timing.options.gpu: unknown key 'nvlnk_bandwidth_GBps'; expected one of:" in res.stderr
    assert "nvlink_bandwidth_GBps" in res.stderr.split("expected one of:")[1]


def test_a_gpu_given_by_figures_names_what_it_lacks(tmp_path: Path) -> None:
    missing = _policy_with_gpu(tmp_path, "{hbm_bandwidth_GBps: 3350, bf16_dense_tflops: 989.4}")
    res = run_cli("validate", str(missing))
    assert res.returncode == 2 and "$.timing.options.gpu: 'memory_gb' is required" in res.stderr


def test_a_catalogue_entry_copied_as_it_is_is_a_valid_gpu(tmp_path: Path) -> None:
    entry = catalogue()["gpus"]["H100-SXM-80GB"]
    path = _policy_with_gpu(tmp_path, json.dumps(entry))
    res = run_cli("validate", str(path))
    assert res.returncode == 0, res.stderr
