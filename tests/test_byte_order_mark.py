"""A UTF-8 byte order mark before a text input (Excel writes one before a CSV
file's header, other Windows tools before JSON) is read as if absent, by every
reader: CSV and JSONL traces (import, replay --input), workload files, gate
observations and client files, policies, timing points. Lines and columns count
from after it."""

from __future__ import annotations

import codecs
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES, run_cli
from tickgate.gate.inputs import load_observations, read_side
from tickgate.host.policy import load_policy
from tickgate.timing.points import read_points
from tickgate.util.errors import InputError
from tickgate.workload.sources import open_requests

BOM = codecs.BOM_UTF8
TRACES = FIXTURES / "realdata" / "traces"
CLIENTS = FIXTURES / "realdata" / "clients"


def _with_bom(source: Path, target: Path, *, lines: int | None = None) -> Path:
    data = source.read_bytes()
    if lines is not None:
        data = b"".join(data.splitlines(keepends=True)[:lines])
    target.write_bytes(BOM + data)
    return target


def _requests(path: Path, fmt: str) -> list[object]:
    stream, _ = open_requests(path, fmt)
    return list(stream)


@pytest.mark.parametrize(
    ("source", "fmt"),
    [
        (TRACES / "mooncake_conversation_trace.jsonl", "mooncake"),  # JSONL
        (TRACES / "AzureLLMInferenceTrace_code.csv", "azure"),  # CSV: the header's first column
        (TRACES / "splitwise_sim_test_trace.csv", "splitwise"),
    ],
)
def test_a_trace_reads_the_same_with_a_byte_order_mark(tmp_path: Path, source: Path, fmt: str) -> None:
    plain = tmp_path / f"plain{source.suffix}"
    plain.write_bytes(b"".join(source.read_bytes().splitlines(keepends=True)[:200]))
    marked = _with_bom(plain, tmp_path / f"marked{source.suffix}")
    assert _requests(marked, fmt) == _requests(plain, fmt)


def test_a_workload_file_reads_the_same_with_a_byte_order_mark(tmp_path: Path) -> None:
    marked = _with_bom(FIXTURES / "workload.json", tmp_path / "w.json")
    assert _requests(marked, "workload") == _requests(FIXTURES / "workload.json", "workload")


def test_columns_count_from_after_the_mark(tmp_path: Path) -> None:
    bad = tmp_path / "w.json"
    bad.write_bytes(BOM + b'{"version": 1, "requests": [x]}')
    with pytest.raises(InputError) as err:
        _requests(bad, "workload")
    assert (err.value.line, err.value.column) == (1, 29), err.value
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(BOM + b'{"timestamp": 0, "input_length": 1, x}\n')
    with pytest.raises(InputError) as err:
        _requests(trace, "mooncake")
    assert (err.value.line, err.value.column) == (1, 37), err.value


def test_gate_inputs_and_client_files_read_the_same_with_a_byte_order_mark(tmp_path: Path) -> None:
    vllm = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
    marked = _with_bom(vllm, tmp_path / "vllm.json")
    doc, want = load_observations(marked), load_observations(vllm)
    assert doc["requests"] == want["requests"]
    sglang = CLIENTS / "sglang_bench_serving_0.5.23" / "sglang_vllm_baseline.jsonl"
    marked = _with_bom(sglang, tmp_path / "sglang.jsonl")
    assert load_observations(marked)["requests"] == load_observations(sglang)["requests"]
    aiperf = CLIENTS / "aiperf_0.13" / "aiperf_chat_baseline"
    copy = tmp_path / "aiperf"
    shutil.copytree(aiperf, copy)
    _with_bom(aiperf / "profile_export.jsonl", copy / "profile_export.jsonl")
    assert load_observations(copy)["requests"] == load_observations(aiperf)["requests"]
    neutral = tmp_path / "neutral.json"
    neutral.write_text(json.dumps(want))
    marked = _with_bom(neutral, tmp_path / "neutral-marked.json")
    assert read_side(marked, "b").ids == read_side(neutral, "b").ids


def test_a_policy_and_timing_points_read_the_same_with_a_byte_order_mark(tmp_path: Path) -> None:
    policy = _with_bom(POLICIES / "default.yaml", tmp_path / "p.yaml")
    assert load_policy(policy).data == load_policy(POLICIES / "default.yaml").data
    points = FIXTURES / "realdata" / "measured" / "points.jsonl"
    marked = _with_bom(points, tmp_path / "points.jsonl", lines=3)
    assert [p.data for p in read_points(marked)] == [p.data for p in read_points(points)[:3]]


@pytest.mark.parametrize(
    ("name", "fmt"), [("mooncake_conversation_trace.jsonl", "mooncake"), ("AzureLLMInferenceTrace_code.csv", "azure")]
)
def test_import_and_replay_take_a_marked_trace(tmp_path: Path, name: str, fmt: str) -> None:
    """What a user runs: ``tickgate import`` and ``replay --input-format``, CSV and JSONL."""
    marked = _with_bom(TRACES / name, tmp_path / name, lines=40)
    plain = tmp_path / f"plain-{name}"
    plain.write_bytes(marked.read_bytes()[len(BOM) :])
    for trace, out in ((marked, "a.json"), (plain, "b.json")):
        res = run_cli("import", fmt, str(trace), "--output", str(tmp_path / out), "--quiet")
        assert res.returncode == 0, res.stderr
    a, b = (json.loads((tmp_path / out).read_text()) for out in ("a.json", "b.json"))
    assert a["requests"] == b["requests"] and len(a["requests"]) > 0
    res = run_cli(
        "replay", "--input", str(marked), "--input-format", fmt, "--limit", "5",
        "--policy", str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(tmp_path / "r.json"), "--quiet",
    )
    assert res.returncode == 0, res.stderr
