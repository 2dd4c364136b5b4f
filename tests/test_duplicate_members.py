"""A JSON object that names a member twice is refused, at every depth, by every
reader (issue 32): every JSON library keeps the last of the two, so a
duplicated ``latency_ms`` in one request flipped a gate from promote to hold
without a word. The error names the file, the line and column of the second
member, its JSON path and the name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES, run_cli
from tickgate.gate.inputs import load_observations, read_side
from tickgate.host.policy import load_policy
from tickgate.timing.models import lookup_model
from tickgate.timing.points import read_points
from tickgate.util.errors import InputError
from tickgate.workload.sources import open_requests

CLIENTS = FIXTURES / "realdata" / "clients"
TRACES = FIXTURES / "realdata" / "traces"


def _twice(text: str, member: str, again: str, nth: int = 1) -> str:
    """``text`` with ``again`` (``"name": value``) put right after the ``nth``
    occurrence of ``member`` (``"name": value``, as written)."""
    at = -1
    for _ in range(nth):
        at = text.index(member, at + 1)
    end = at + len(member)
    return text[:end] + ", " + again + text[end:]


def _located(err: pytest.ExceptionInfo[InputError], path: Path, json_path: str, name: str) -> None:
    e = err.value
    assert e.path == str(path), e
    assert e.message == f"duplicate member {name!r}", e
    assert e.json_path == json_path, e
    assert e.line is not None and e.column is not None, e
    line = path.read_text(encoding="utf-8-sig").splitlines()[e.line - 1]
    assert line[e.column - 1 :].startswith(f'"{name}"'), (e, line)  # the second member, where it is


def test_the_gate_refuses_a_request_that_gives_its_latency_twice(tmp_path: Path) -> None:
    """The reported case: normalized observations whose request 3 gives
    ``latency_ms`` twice, the second three times the first."""
    base = tmp_path / "base.json"
    res = run_cli("normalize", str(CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"), "-o", str(base))
    assert res.returncode == 0, res.stderr
    doc = json.loads(base.read_text())
    latency = doc["requests"][3]["latency_ms"]
    text = base.read_text()
    bad = tmp_path / "cand.json"
    bad.write_text(_twice(text, f'"latency_ms": {latency}', f'"latency_ms": {latency * 3}'))
    out = tmp_path / "g.json"
    res = run_cli("gate", "--baseline", str(base), "--candidate", str(bad), "--output", str(out))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "$.requests[3].latency_ms: duplicate member 'latency_ms'" in res.stderr and str(bad) in res.stderr
    assert not out.exists()
    with pytest.raises(InputError) as err:
        read_side(bad, "candidate")
    _located(err, bad, "$.requests[3].latency_ms", "latency_ms")


def test_client_files_refuse_a_member_given_twice(tmp_path: Path) -> None:
    vllm = (CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json").read_text()
    bad = tmp_path / "vllm.json"
    bad.write_text(_twice(vllm, '"completed": 200', '"completed": 100'))
    with pytest.raises(InputError) as err:
        load_observations(bad)
    _located(err, bad, "$.completed", "completed")

    sglang = (CLIENTS / "sglang_bench_serving_0.5.23" / "sglang_vllm_baseline.jsonl").read_text()
    bad = tmp_path / "sglang.jsonl"
    bad.write_text(_twice(sglang, '"completed": 200', '"completed": 100'))
    with pytest.raises(InputError) as err:
        load_observations(bad)
    _located(err, bad, "$.completed", "completed")

    aiperf = tmp_path / "aiperf"
    shutil.copytree(CLIENTS / "aiperf_0.13" / "aiperf_chat_baseline", aiperf)
    records = aiperf / "profile_export.jsonl"
    records.write_text(_twice(records.read_text(), '"unit":"ms"', '"unit":"s"', nth=7))
    with pytest.raises(InputError) as err:
        load_observations(aiperf)
    assert err.value.message == "duplicate member 'unit'" and err.value.json_path.startswith("$.metrics."), err.value
    assert err.value.path == str(records) and err.value.line is not None and err.value.column is not None


def test_workloads_and_traces_refuse_a_member_given_twice(tmp_path: Path, json_windows) -> None:
    text = (FIXTURES / "workload.json").read_text()
    bad = tmp_path / "w.json"
    bad.write_text(_twice(text, '"prompt_tokens": 48', '"prompt_tokens": 4800'))
    for window in (64, None):  # in a window of requests, and one by one
        json_windows(window)
        with pytest.raises(InputError) as err:
            list(open_requests(bad)[0])
        _located(err, bad, "$.requests[2].prompt_tokens", "prompt_tokens")
    bad.write_text(_twice(text, '"version": 1', '"version": 1'))
    with pytest.raises(InputError) as err:
        list(open_requests(bad)[0])
    assert err.value.json_path == "$.version" and err.value.message == "duplicate member 'version'"

    lines = (TRACES / "mooncake_conversation_trace.jsonl").read_text().splitlines(keepends=True)[:20]
    lines[11] = _twice(lines[11], '"output_length": ' + str(json.loads(lines[11])["output_length"]), '"output_length": 1')
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(lines))
    with pytest.raises(InputError) as err:
        list(open_requests(trace, "mooncake")[0])
    _located(err, trace, "$.output_length", "output_length")
    assert err.value.line == 12


def test_timing_points_model_configs_and_policies_refuse_a_member_given_twice(tmp_path: Path) -> None:
    points = (FIXTURES / "realdata" / "measured" / "points.jsonl").read_text().splitlines(keepends=True)[:3]
    model = json.loads(points[1])["model_key"]
    points[1] = _twice(points[1], f'"model_key": "{model}"', f'"model_key": "{model}"')
    path = tmp_path / "points.jsonl"
    path.write_text("".join(points))
    with pytest.raises(InputError) as err:
        read_points(path)
    _located(err, path, "$.model_key", "model_key")
    assert err.value.line == 2

    config = tmp_path / "config.json"
    config.write_text(
        '{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,\n'
        ' "num_attention_heads": 32, "num_key_value_heads": 8, "num_attention_heads": 64,\n'
        ' "intermediate_size": 14336, "vocab_size": 128256}'
    )
    with pytest.raises(InputError) as err:
        lookup_model(str(config))
    _located(err, config, "$.num_attention_heads", "num_attention_heads")

    policy = tmp_path / "p.json"  # a policy given as JSON is read as YAML, which refuses it too
    data = json.dumps(load_policy(POLICIES / "default.yaml").data)
    policy.write_text(_twice(data, '"page_size": 16', '"page_size": 8'))
    with pytest.raises(InputError) as err:
        load_policy(policy)
    assert 'duplicate key "page_size"' in err.value.message and err.value.line == 1 and err.value.column is not None
