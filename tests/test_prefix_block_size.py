"""Workload prefix-block ids cover the workload's block size, whatever the engine's.

Mooncake's ids cover 512 tokens while vLLM presets use 16-token blocks: the
workload's ``block_size`` reaches the scheduler (BuildContext.prefix_block_size)
and one id stands for 512 / 16 KV blocks of the same content.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def _sglang_policy(tmp_path: Path, page_size: int, extra: str = "") -> Path:
    text = (POLICIES / "sglang-default.yaml").read_text()
    text = text.replace("page_size: 1 ", f"page_size: {page_size} ").replace("options:\n", f"options:\n{extra}", 1)
    path = tmp_path / f"sglang-{page_size}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("page_size", "full_hit"), [(1, 1535), (16, 1520)])
def test_sglang_counts_a_512_token_block_as_its_pages(tmp_path: Path, page_size: int, full_hit: int) -> None:
    """The SGLang mirror reads the workload's block size (a Mooncake id covers 512 tokens,
    whatever the preset's page size) and matches blocks page by page, as SGLang does:
    a fully cached prompt hits all but its last token, rounded down to a page."""
    workload = {"version": 1, "block_size": 512, "requests": [
        {"id": "r0", "prompt_tokens": 2100, "max_output_tokens": 2, "arrival_tick": 0, "prefix_blocks": [7, 1, 5, 9]},
        {"id": "r1", "prompt_tokens": 1600, "max_output_tokens": 2, "arrival_tick": 50, "prefix_blocks": [7, 1, 6]},
        {"id": "r2", "prompt_tokens": 1536, "max_output_tokens": 2, "arrival_tick": 100, "prefix_blocks": [7, 1, 5]},
    ]}
    report = _replay(tmp_path, workload, _sglang_policy(tmp_path, page_size))
    hits = {o["id"]: o.get("prefix_hit_tokens", 0) for o in report["outcomes"]}
    assert hits == {"r0": 0, "r1": 1024, "r2": full_hit}


def test_sglang_refuses_a_prefix_block_size_the_workload_contradicts(tmp_path: Path) -> None:
    policy = _sglang_policy(tmp_path, 16, "    prefix_block_size: 16\n")
    w = tmp_path / "w.json"
    w.write_text(json.dumps(shared_prefix_workload(512, [[7, 1]])))
    res = run_cli("replay", "--input", str(w), "--policy", str(policy), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2
    line = policy.read_text().splitlines().index("  name: sglang") + 1  # the scheduler's name, as located
    assert res.stderr.strip() == (
        f"error: {policy}:{line}:3: $.scheduler.name: scheduler \"sglang\": scheduler.options.prefix_block_size 16 "
        "contradicts the workload, whose prefix blocks cover 512 tokens (its block_size); remove the option "
        "(the workload's size is used)")
    # without a block size in the workload the option still says what the ids cover
    del_size = shared_prefix_workload(512, [[7, 1], [7, 2]])
    del del_size["block_size"]
    report = _replay(tmp_path, del_size, policy)
    assert {o["id"]: o.get("prefix_hit_tokens", 0) for o in report["outcomes"]} == {"r0": 0, "r1": 16}
