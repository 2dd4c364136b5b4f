"""A measured point is replayed with what it says about the run: its client's concurrency
(``workload.max_concurrency``: closed-loop clients, not an open loop) and the engine flags it gives
as numbers (vLLM's ``max_num_seqs`` and ``max_num_batched_tokens``, SGLang's
``max_running_requests`` and ``chunked_prefill_size``), never a fixed 8192 whatever it says."""

from __future__ import annotations

from pathlib import Path

from tickgate.timing.check import predict
from tickgate.timing.points import Point, setup_point

BASE = {
    "id": "p",
    "engine": "vllm",
    "model_key": "llama-3.1-8b",
    "gpu_key": "H100-SXM-80GB",
    "tp": 1,
    "workload": {"isl": 2048, "osl": 64, "num_requests": 32, "request_rate": "inf"},
    "measured": {"ttft_ms_mean": 100.0},
}


def _point(**changes: dict[str, object]) -> Point:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for section, values in changes.items():
        data[section] = {**(data.get(section) or {}), **values}  # type: ignore[dict-item]  # sections are dicts
    return Point("p", data, 1, Path("points.jsonl"))


def test_the_points_vllm_flags_are_the_schedulers() -> None:
    setup = setup_point(_point(engine_flags={"max_num_seqs": 256, "max_num_batched_tokens": 2048}))
    options = setup.policy["scheduler"]["options"]
    assert (options["max_num_seqs"], options["max_num_batched_tokens"]) == (256, 2048)
    assert not any("max_num_batched_tokens" in a for a in setup.assumed)
    # words ("default (256)") are not numbers: the defaults, said so
    setup = setup_point(_point(engine_flags={"max_num_seqs": "default (256)"}))
    assert setup.policy["scheduler"]["options"]["max_num_batched_tokens"] == 8192
    assert any("max_num_batched_tokens 8192" in a for a in setup.assumed)


def test_the_points_sglang_flags_are_the_schedulers() -> None:
    point = _point(engine_flags={"max_running_requests": 16, "chunked_prefill_size": 4096})
    point = Point("p", {**point.data, "engine": "sglang"}, 1, point.file)
    options = setup_point(point).policy["scheduler"]["options"]
    assert (options["max_running_requests"], options["chunked_prefill_size"]) == (16, 4096)


def test_a_closed_loop_point_keeps_its_clients() -> None:
    closed = _point(workload={"max_concurrency": 4})
    setup = setup_point(closed)
    assert setup.max_concurrency == 4
    # four at a time queue far less than 32 sent at once
    open_loop = _point()
    assert predict(closed, setup)["ttft_ms_mean"] < predict(open_loop, setup_point(open_loop))["ttft_ms_mean"] / 3
