"""Rejections are counted by reason, not by request: every in-tree scheduler gives a
reason that quotes the request's numbers a key without them and the numbers as figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import POLICIES, TOYS
from tickgate.interfaces.model import Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay


@pytest.mark.parametrize(("policy", "key", "figure"), [
    # toy pools, so that prompts of 40k-60k tokens cannot fit (the engine presets' real pools hold them)
    (POLICIES / "default.yaml", "needs more KV pages than the cache has", "needed_pages"),
    (TOYS / "vllm-v1-toy.yaml", "needs more KV blocks than the pool has (vLLM would stall on it)", "needed_blocks"),
    (TOYS / "trtllm-toy-max-utilization.yaml", "needs more KV blocks to completion than the cache has", "needed_blocks"),
    (TOYS / "sglang-toy.yaml", "prompt leaves no room for output within the request limit", "prompt_tokens"),
], ids=lambda value: value.stem if hasattr(value, "stem") else None)
def test_each_scheduler_groups_its_rejections(policy: Path, key: str, figure: str) -> None:
    sizes = [60_000, 40_000, 50_000]
    requests = [Request(id="small", prompt_tokens=32, max_output_tokens=4),
                *(Request(id=f"big{i}", prompt_tokens=n, max_output_tokens=8) for i, n in enumerate(sizes))]
    report = replay(requests, load_policy(policy))
    stats = report["requests"]
    assert stats["rejections_by_reason"] == {key: 3}
    figures = stats["rejection_figures"][key]
    first = next(o["reason"] for o in report["outcomes"] if o["status"] == "rejected")
    assert figures["example"] == first and first != key
    low, high = figures[figure]["min"], figures[figure]["max"]
    assert low < high and str(high) not in key
