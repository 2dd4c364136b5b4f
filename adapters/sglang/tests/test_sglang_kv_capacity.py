"""``max_total_tokens: auto`` (issue 20): the pool SGLang would profile from GPU memory
(``ModelRunner.profile_max_num_token``: ``rest = free after weights - total x (1 -
mem_fraction_static)``, ``tokens = rest // cell_size``), the default
``mem_fraction_static`` by tensor-parallel size (SGLang 0.4.0 ``ServerArgs``) and
the default ``max_running_requests`` (``KVCacheConfigurator.resolve_max_num_reqs``),
worked by hand from the catalogue's figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tickgate import InputError, Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.format import read_workload
from tickgate_sglang.options import default_mem_fraction_static

REPO = Path(__file__).resolve().parents[3]
#: llama-3.1-8b (catalogue): 8 030 261 248 parameters, 131 072 KV bytes per token, 131 072 positions
PARAMS, KV_TOKEN, CONTEXT = 8_030_261_248, 131_072, 131_072


def roofline(tp: int = 1, gpu: Any = "H100-SXM-80GB") -> dict[str, Any]:
    return {"name": "roofline", "options": {"model": "llama-3.1-8b", "gpu": gpu, "tensor_parallel_size": tp}}


def load(tmp_path: Path, options: dict[str, Any], timing: dict[str, Any] | None, name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "sglang", "options": options}}
    if timing is not None:
        doc["timing"] = timing
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))  # JSON is YAML
    return load_policy(path)


def fixture_requests() -> list[Request]:
    return list(read_workload(REPO / "fixtures" / "workload.json").requests)


def by_hand_tokens(fraction: float, tp: int = 1, memory_gb: float = 80) -> int:
    """SGLang: total x mem_fraction_static - weights, over the cell size (KV heads split by tp)."""
    return int((memory_gb * 2**30 * 0.99 * fraction - PARAMS * 2 / tp) // (KV_TOKEN // tp))


def test_the_default_fraction_follows_tensor_parallel_size_as_sglang_0_4_0() -> None:
    assert [default_mem_fraction_static(tp) for tp in (1, 2, 3, 4, 7, 8, 15, 16, 32)] == \
        [0.88, 0.87, 0.87, 0.85, 0.85, 0.81, 0.81, 0.79, 0.79]


@pytest.mark.parametrize("tp, fraction", [(1, 0.88), (2, 0.87), (8, 0.81)])
def test_auto_gives_sglangs_pool_and_request_limit(tmp_path: Path, tp: int, fraction: float) -> None:
    report = replay(fixture_requests(), load(tmp_path, {"max_total_tokens": "auto"}, roofline(tp)))
    cap = report["scheduler"]["kv_capacity"]
    tokens = by_hand_tokens(fraction, tp)
    estimated = min(max(int(tokens / CONTEXT * 512), 2048), 4096)
    assert (cap["mem_fraction_static"], cap["tokens"]) == (fraction, tokens)
    assert cap["context_length"] == CONTEXT and cap["max_running_requests"] == min(estimated, tokens // 2)
    assert "activation_gb" not in cap  # SGLang's formula leaves the rest of memory to activations
    assert report["summary"]["completed_requests"] == 4
    if tp == 1:
        # 80 x 2**30 x 0.99 x 0.88 - 16 060 522 496 = 58 774 987 669.504 bytes = 448 417 tokens of 131 072;
        # int(448 417 / 131 072 x 512) = 1751, clamped to 2048 (docs/sglang.md)
        assert tokens == 448_417 and cap["max_running_requests"] == 2048
        assert cap["kv_gb"] == 58.775 and cap["weights_gb_per_gpu"] == 16.061
        assert cap["gpu_memory_gb"] == 85.04  # GB of 1e9: the CUDA-visible 79.2 GiB


def test_set_options_win_and_pages_align_the_pool(tmp_path: Path) -> None:
    options = {"max_total_tokens": "auto", "mem_fraction_static": 0.8, "page_size": 16,
               "max_running_requests": 100, "context_length": 8192}
    cap = replay(fixture_requests(), load(tmp_path, options, roofline()))["scheduler"]["kv_capacity"]
    assert cap["tokens"] == by_hand_tokens(0.8) // 16 * 16 and cap["page_size"] == 16
    assert "max_running_requests" not in cap and "context_length" not in cap  # the policy's own
    more = replay(fixture_requests(), load(tmp_path, {**options, "mem_fraction_static": 0.9}, roofline()))
    assert more["scheduler"]["kv_capacity"]["tokens"] > cap["tokens"]


def test_auto_without_a_timing_model_that_knows_memory_is_a_located_error(tmp_path: Path) -> None:
    for timing in (None, {"fixed_ms": 1.0}):
        with pytest.raises(InputError, match=r"max_total_tokens: auto needs a timing model that knows the model "
                                             r"and GPU \(timing: \{name: roofline") as err:
            replay(fixture_requests(), load(tmp_path, {"max_total_tokens": "auto"}, timing))
        assert err.value.json_path == "$.scheduler.name" and err.value.line is not None
    with pytest.raises(InputError, match="mem_fraction_static sizes the pool only with max_total_tokens: auto"):
        replay(fixture_requests(), load(tmp_path, {"max_total_tokens": 4096, "mem_fraction_static": 0.8}, None))


def test_a_replay_with_auto_decides_as_the_same_pool_given_explicitly(tmp_path: Path) -> None:
    """A GPU small enough that the pool binds (retractions happen): auto makes the
    decisions of max_total_tokens, context_length and max_running_requests set to
    what it found."""
    gpu = {"memory_gb": 17.31, "hbm_bandwidth_GBps": 2000, "bf16_dense_tflops": 300}
    # 17.31 x 2**30 x 0.99 x 0.88 - 16 060 522 496 = 132 011 016.06 bytes = 1007 tokens of 131 072
    tokens = by_hand_tokens(0.88, memory_gb=17.31)
    assert tokens == 1007
    requests = [Request(id=f"r{i}", prompt_tokens=100 + 13 * (i % 9), max_output_tokens=80 + 7 * (i % 5),
                        arrival_tick=i) for i in range(40)]
    auto = replay(requests, load(tmp_path, {"max_total_tokens": "auto"}, roofline(gpu=gpu), "a.yaml"))
    cap = auto["scheduler"].pop("kv_capacity")
    assert cap["tokens"] == tokens and cap["max_running_requests"] == tokens // 2
    given = {"max_total_tokens": tokens, "context_length": CONTEXT, "max_running_requests": tokens // 2}
    explicit = replay(requests, load(tmp_path, given, roofline(gpu=gpu), "b.yaml"))
    assert auto["scheduler"] == explicit["scheduler"] and auto["scheduler"]["retractions"] > 0
    assert auto["summary"] == explicit["summary"] and auto["latency"] == explicit["latency"]
