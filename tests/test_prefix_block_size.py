"""Workload prefix-block ids cover the workload's block size, whatever the engine's.

Mooncake's ids cover 512 tokens while vLLM presets use 16-token blocks: the
workload's ``block_size`` reaches the scheduler (BuildContext.prefix_block_size)
and one id stands for 512 / 16 KV blocks of the same content.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES, POLICIES, run_cli


def _replay(tmp_path: Path, workload: dict, policy: Path) -> dict:
    w = tmp_path / "w.json"
    w.write_text(json.dumps(workload))
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(w), "--policy", str(policy), "--output", str(out))
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def shared_prefix_workload(block_size: int, ids_per_request: list[list[int]]) -> dict:
    return {"version": 1, "block_size": block_size, "requests": [
        {"id": f"r{i}", "prompt_tokens": 100, "max_output_tokens": 2, "arrival_tick": 10 * i,
         "prefix_blocks": ids} for i, ids in enumerate(ids_per_request)]}


def test_coarse_prefix_ids_expand_to_engine_blocks(tmp_path: Path) -> None:
    # Two requests share their first 64-token block id: 4 vLLM blocks of 16 tokens.
    report = _replay(tmp_path, shared_prefix_workload(64, [[7, 1], [7, 2]]), POLICIES / "vllm-v1-bench.yaml")
    hits = {o["id"]: o.get("prefix_hit_tokens", 0) for o in report["outcomes"]}
    assert hits == {"r0": 0, "r1": 64}


def test_same_ids_at_engine_block_size(tmp_path: Path) -> None:
    report = _replay(tmp_path, shared_prefix_workload(16, [[7, 1, 5], [7, 1, 6]]), POLICIES / "vllm-v1-bench.yaml")
    hits = {o["id"]: o.get("prefix_hit_tokens", 0) for o in report["outcomes"]}
    assert hits == {"r0": 0, "r1": 32}


def test_mooncake_trace_gets_prefix_hits_under_vllm_bench(tmp_path: Path) -> None:
    trace = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
    w = tmp_path / "w.json"
    res = run_cli("import", "mooncake", str(trace), "--limit", "300", "--output", str(w))
    assert res.returncode == 0, res.stderr
    assert json.loads(w.read_text().splitlines()[0] + "]}")["block_size"] == 512
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(w), "--policy", str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(out))
    assert res.returncode == 0, res.stderr
    cache = json.loads(out.read_text())["scheduler"]["prefix_cache"]
    assert cache["hit_tokens"] > 0 and cache["hit_tokens"] % 16 == 0
