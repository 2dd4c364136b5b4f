"""``kv_cache_max_tokens: auto`` (issue 20): the pool TensorRT-LLM would allocate,
``KvCacheConfig.free_gpu_memory_fraction`` (default 0.9) of the memory free after
the weights and a step's buffers, in whole blocks; worked by hand from the
catalogue's figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tickgate import InputError, Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.format import read_workload

REPO = Path(__file__).resolve().parents[3]
ROOFLINE = {"name": "roofline", "options": {"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB"}}
#: llama-3.1-8b (catalogue): 8 030 261 248 parameters, 131 072 KV bytes per token, hidden 4096, MLP 14336
PARAMS, KV_TOKEN, HIDDEN, INTER, VOCAB = 8_030_261_248, 131_072, 4096, 14336, 128256


def by_hand_blocks(fraction: float, tpb: int = 32, max_num_tokens: int = 8192, max_batch_size: int = 2048,
                   memory_gb: float = 80) -> int:
    forward = max_num_tokens * (3 * INTER + 2 * HIDDEN) * 2
    sampler = max_num_tokens * HIDDEN * 2 + min(max_num_tokens, max_batch_size) * VOCAB * 6
    free = (memory_gb * 2**30 * 0.99 - PARAMS * 2 - max(forward, sampler) - 1.5e9) * fraction
    return int(free // KV_TOKEN) // tpb


def load(tmp_path: Path, options: dict[str, Any], timing: dict[str, Any] | None = ROOFLINE,
         name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "trtllm", "options": options}}
    if timing is not None:
        doc["timing"] = timing
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))  # JSON is YAML
    return load_policy(path)


def fixture_requests() -> list[Request]:
    return list(read_workload(REPO / "fixtures" / "workload.json").requests)


def test_auto_gives_trtllms_pool_for_llama_8b_on_an_h100(tmp_path: Path) -> None:
    report = replay(fixture_requests(), load(tmp_path, {"kv_cache_max_tokens": "auto"}))
    cap = report["scheduler"]["kv_capacity"]
    blocks = by_hand_blocks(0.9)
    # (80 x 2**30 x 0.99 - 16 060 522 496 - 1 643 118 592 (sampler: 8192 x 4096 x 2 + 2048 x 128 256 x 6)
    # - 1.5e9) x 0.9 = 59 253 040 235.52 bytes = 452 064 tokens = 14 127 blocks of 32 (docs/trtllm.md)
    assert blocks == 14127
    assert cap == {"source": "auto", "kv_cache_free_gpu_mem_fraction": 0.9, "gpu_memory_gb": 85.04,
                   "weights_gb_per_gpu": 16.061, "activation_gb": 1.643, "non_torch_gb": 1.5, "kv_gb": 59.253,
                   "kv_bytes_per_token": KV_TOKEN, "tokens": blocks * 32, "blocks": blocks, "tokens_per_block": 32}
    assert report["summary"]["completed_requests"] == 4


def test_a_higher_fraction_and_a_smaller_step_give_more_blocks(tmp_path: Path) -> None:
    def blocks(**options: Any) -> int:
        report = replay(fixture_requests(), load(tmp_path, {"kv_cache_max_tokens": "auto", **options}))
        return int(report["scheduler"]["kv_capacity"]["blocks"])

    assert blocks(kv_cache_free_gpu_mem_fraction=0.95) == by_hand_blocks(0.95) > blocks()
    assert blocks(max_batch_size=256, max_num_tokens=4096, tokens_per_block=64) == \
        by_hand_blocks(0.9, 64, 4096, 256)


def test_auto_needs_a_memory_aware_timing_model_and_is_the_only_pool_given(tmp_path: Path) -> None:
    for timing in (None, {"fixed_ms": 1.0}):
        with pytest.raises(InputError, match=r"kv_cache_max_tokens: auto needs a timing model that knows the "
                                             r"model and GPU \(timing: \{name: roofline") as err:
            replay(fixture_requests(), load(tmp_path, {"kv_cache_max_tokens": "auto"}, timing))
        assert err.value.json_path == "$.scheduler.name" and err.value.line is not None
    with pytest.raises(InputError, match="exactly one of kv_cache_blocks and kv_cache_max_tokens"):
        replay(fixture_requests(), load(tmp_path, {"kv_cache_max_tokens": "auto", "kv_cache_blocks": 10}))
    with pytest.raises(InputError, match="kv_cache_free_gpu_mem_fraction sizes the pool only with "
                                         "kv_cache_max_tokens: auto"):
        replay(fixture_requests(), load(tmp_path, {"kv_cache_blocks": 100, "kv_cache_free_gpu_mem_fraction": 0.5}))


def test_a_replay_with_auto_decides_as_the_same_pool_given_explicitly(tmp_path: Path) -> None:
    """A GPU small enough that the pool binds: requests are paused, and every
    decision is the one of ``kv_cache_blocks`` set to the count auto found."""
    gpu = {"memory_gb": 16.89, "hbm_bandwidth_GBps": 2000, "bf16_dense_tflops": 300}
    timing = {"name": "roofline", "options": {"model": "llama-3.1-8b", "gpu": gpu}}
    options = {"tokens_per_block": 16, "max_batch_size": 64, "max_num_tokens": 1024,
               "capacity_scheduler_policy": "MAX_UTILIZATION"}
    # (16.89 x 2**30 x 0.99 - 16 060 522 496 - 104 857 600 (1024 x 51 200 x 2) - 1.5e9) x 0.9
    # = 259 887 885.56 bytes = 1982 tokens = 123 blocks of 16
    blocks = by_hand_blocks(0.9, 16, 1024, 64, memory_gb=16.89)
    assert blocks == 123
    requests = [Request(id=f"r{i}", prompt_tokens=100 + 13 * (i % 9), max_output_tokens=80 + 7 * (i % 5),
                        arrival_tick=i) for i in range(40)]
    auto = replay(requests, load(tmp_path, {**options, "kv_cache_max_tokens": "auto"}, timing, "a.yaml"))
    assert auto["scheduler"].pop("kv_capacity")["blocks"] == blocks
    explicit = replay(requests, load(tmp_path, {**options, "kv_cache_blocks": blocks}, timing, "b.yaml"))
    assert auto["scheduler"] == explicit["scheduler"] and auto["scheduler"]["pauses"] > 0
    assert auto["summary"] == explicit["summary"] and auto["latency"] == explicit["latency"]
