"""``num_gpu_blocks: auto`` (issue 20): the pool vLLM would allocate from GPU memory
(``Worker.determine_available_memory``, ``kv_cache_utils.get_num_blocks``), worked
by hand from the catalogue's figures; the report shows it; a replay with it makes
the decisions of the same pool given explicitly."""

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


def by_hand_blocks(memory_gb: float, util: float, block: int, batched: int, seqs: int) -> int:
    """vLLM: total x util - weights - activation peak - non-torch; blocks of ``block`` tokens."""
    forward = batched * (3 * INTER + 2 * HIDDEN) * 2
    sampler = batched * HIDDEN * 2 + min(batched, seqs) * VOCAB * 6
    free = memory_gb * 2**30 * 0.99 * util - PARAMS * 2 - max(forward, sampler) - 1.5e9
    return int(free // KV_TOKEN) // block


def load(tmp_path: Path, options: dict[str, Any], timing: dict[str, Any] | None = ROOFLINE,
         name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "vllm-v1", "options": options}}
    if timing is not None:
        doc["timing"] = timing
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))  # JSON is YAML
    return load_policy(path)


def opts(**over: Any) -> dict[str, Any]:
    return {"block_size": 16, "num_gpu_blocks": "auto", "max_num_seqs": 256, "max_num_batched_tokens": 8192,
            **over}


def fixture_requests() -> list[Request]:
    return list(read_workload(REPO / "fixtures" / "workload.json").requests)


def test_auto_gives_vllms_pool_for_llama_8b_on_an_h100(tmp_path: Path) -> None:
    report = replay(fixture_requests(), load(tmp_path, opts()))
    blocks = by_hand_blocks(80, 0.9, 16, 8192, 256)
    # 80 x 2**30 x 0.99 = 85 040 352 460.8 bytes; x 0.9 - 16 060 522 496 (weights) - 838 860 800 (forward:
    # 8192 x 51 200 x 2, above the sampler's 264 102 080) - 1.5e9 = 58 136 933 918.72 bytes
    # = 443 549 tokens of 131 072 bytes = 27 721 blocks of 16 (docs/vllm.md: about 444 k tokens)
    assert blocks == 27721
    cap = report["scheduler"]["kv_capacity"]
    assert cap == {"source": "auto", "gpu_memory_utilization": 0.9, "gpu_memory_gb": 85.04,
                   "weights_gb_per_gpu": 16.061, "activation_gb": 0.839, "non_torch_gb": 1.5, "kv_gb": 58.137,
                   "kv_bytes_per_token": KV_TOKEN, "tokens": blocks * 16, "blocks": blocks, "block_size": 16}
    # the null block is one of vLLM's blocks: usable = blocks - 1, nothing added
    assert report["scheduler"]["kv_blocks"]["usable"] == blocks - 1
    assert report["summary"]["completed_requests"] == 4


def test_a_higher_utilisation_and_a_smaller_step_give_more_blocks(tmp_path: Path) -> None:
    def blocks(**over: Any) -> int:
        return replay(fixture_requests(), load(tmp_path, opts(**over)))["scheduler"]["kv_capacity"]["blocks"]

    assert blocks(gpu_memory_utilization=0.95) == by_hand_blocks(80, 0.95, 16, 8192, 256) > blocks()
    assert blocks(gpu_memory_utilization=0.5) < blocks()
    assert blocks(max_num_batched_tokens=2048) > blocks() > blocks(max_num_batched_tokens=32768)
    assert blocks(block_size=32) == by_hand_blocks(80, 0.9, 32, 8192, 256)
    tp2 = {"name": "roofline", "options": {**ROOFLINE["options"], "tensor_parallel_size": 2}}
    split = replay(fixture_requests(), load(tmp_path, opts(), tp2))["scheduler"]["kv_capacity"]
    assert split["blocks"] > 2 * blocks()  # half the weights and half the KV heads per GPU


def test_auto_without_a_timing_model_that_knows_memory_is_a_located_error(tmp_path: Path) -> None:
    for timing, why in ((None, "there is no timing section"),
                        ({"fixed_ms": 1.0}, "timing model 'linear' does not")):
        with pytest.raises(InputError) as err:
            replay(fixture_requests(), load(tmp_path, opts(), timing))
        text = str(err.value)
        assert why in text
        assert "num_gpu_blocks: auto needs a timing model that knows the model and GPU " \
            "(timing: {name: roofline" in text
        assert err.value.json_path == "$.scheduler.name" and err.value.line is not None
        assert err.value.path == str(tmp_path / "p.yaml")


def test_utilisation_without_auto_and_a_bad_value_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="gpu_memory_utilization sizes the pool only with num_gpu_blocks"):
        replay(fixture_requests(), load(tmp_path, opts(num_gpu_blocks=64, gpu_memory_utilization=0.8)))
    with pytest.raises(InputError, match=r"num_gpu_blocks: 'automatic' is not an integer from 2 to "
                                         r"1000000000 or 'auto'"):
        load(tmp_path, opts(num_gpu_blocks="automatic"))
    with pytest.raises(InputError, match=r"gpu_memory_utilization: 0 is less than or equal to the minimum"):
        load(tmp_path, opts(gpu_memory_utilization=0))
    small = {"name": "roofline", "options": {"model": "llama-3.1-8b",
                                             # 16 x 2**30 x 0.99 x 0.9 = 15.3e9 bytes < 16.06e9 of weights
                                             "gpu": {"memory_gb": 16, "hbm_bandwidth_GBps": 1000,
                                                     "bf16_dense_tflops": 100}}}
    with pytest.raises(InputError, match="no memory left for the KV cache: llama-3.1-8b needs 16.1 GB"):
        replay(fixture_requests(), load(tmp_path, opts(), small))


def test_a_replay_with_auto_decides_as_the_same_pool_given_explicitly(tmp_path: Path) -> None:
    """A GPU small enough that the pool binds: preemptions happen, and every
    decision is the one of ``num_gpu_blocks`` set to the count auto found."""
    gpu = {"memory_gb": 18.25, "hbm_bandwidth_GBps": 2000, "bf16_dense_tflops": 300}
    timing = {"name": "roofline", "options": {"model": "llama-3.1-8b", "gpu": gpu}}
    # 18.25 x 2**30 x 0.99 x 0.95 - 16 060 522 496 - 209 715 200 (2048 x 51 200 x 2) - 1.5e9
    # = 659 601 188.86 bytes = 5032 tokens = 314 blocks of 16
    blocks = by_hand_blocks(18.25, 0.95, 16, 2048, 32)
    assert blocks == 314
    requests = [Request(id=f"r{i}", prompt_tokens=300 + 37 * (i % 9), max_output_tokens=150 + 11 * (i % 7),
                        arrival_tick=i) for i in range(60)]
    options = opts(max_num_seqs=32, max_num_batched_tokens=2048)
    auto = replay(requests, load(tmp_path, {**options, "gpu_memory_utilization": 0.95}, timing, "a.yaml"))
    given = replay(requests, load(tmp_path, {**options, "num_gpu_blocks": blocks}, timing, "b.yaml"))
    assert auto["scheduler"].pop("kv_capacity")["blocks"] == blocks
    assert "kv_capacity" not in given["scheduler"]
    assert auto["scheduler"] == given["scheduler"] and auto["scheduler"]["preemptions"] > 0
    assert auto["summary"] == given["summary"]
    assert auto["latency"] == given["latency"]
