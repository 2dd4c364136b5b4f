"""``tickgate import`` of benchmark-client runs (docs/importers.md, "Benchmark-client runs"), on the
real client files (fixtures/realdata/clients, SOURCES.txt there), copies edited the way each tool
writes a failed request, and garbage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES

pytest.register_assert_rewrite("tickgate.testing")  # before the import: the kit's asserts explain failures

from tickgate.commands.cli import main  # noqa: E402
from tickgate.host.registry import get_registry  # noqa: E402
from tickgate.testing import WorkloadReaderContract  # noqa: E402
from tickgate.workload.format import read_workload  # noqa: E402
from tickgate.workload.generate import send_times_s  # noqa: E402

pytest_plugins = ["tickgate.testing"]

CLIENTS = FIXTURES / "realdata" / "clients"
VLLM = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
SGLANG = CLIENTS / "sglang_bench_serving_0.5.23" / "sglang_vllm_baseline.jsonl"
AIPERF_DIR = CLIENTS / "aiperf_0.13" / "aiperf_chat_baseline"
AIPERF = AIPERF_DIR / "profile_export.jsonl"
GENAI_DIR = CLIENTS / "genai_perf_0.0.16" / "genaiperf_chat_baseline" / "mock-model-openai-chat-request_rate8.0"
GENAI = GENAI_DIR / "profile_export.json"


class TestVllmBenchReader(WorkloadReaderContract):
    plugin_name = "vllm-bench"
    distribution = "tickgate-vllm"
    sample = VLLM


class TestSglangBenchReader(WorkloadReaderContract):
    plugin_name = "sglang-bench"
    distribution = "tickgate-sglang"
    sample = SGLANG


class TestAiperfReader(WorkloadReaderContract):
    plugin_name = "aiperf"
    distribution = "tickgate"
    sample = AIPERF


class TestGenaiPerfReader(WorkloadReaderContract):
    plugin_name = "genai-perf"
    distribution = "tickgate"
    sample = GENAI


def run_import(capsys: pytest.CaptureFixture[str], fmt: str, path: Path, out: Path) -> tuple[int, str, str]:
    code = main(["import", fmt, str(path), "--output", str(out)])
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr


def imported(capsys: pytest.CaptureFixture[str], fmt: str, path: Path, tmp_path: Path) -> tuple[Any, list[Any]]:
    out = tmp_path / f"{fmt}.json"
    code, _, err = run_import(capsys, fmt, path, out)
    assert code == 0, err
    workload = read_workload(out)
    return workload.header, list(workload.requests)


# -- the real files ----------------------------------------------------------------


def test_vllm_bench_lengths_and_send_times_are_the_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = json.loads(VLLM.read_text())
    header, requests = imported(capsys, "vllm-bench", VLLM, tmp_path)
    assert len(requests) == data["num_prompts"] == 200
    by_id = {r.id: r for r in requests}
    first = min(data["start_times"])
    for i in range(200):
        r = by_id[f"vb-{i:05d}"]
        assert (r.prompt_tokens, r.max_output_tokens) == (data["input_lens"][i], data["output_lens"][i])
        assert r.arrival_ms == pytest.approx((data["start_times"][i] - first) * 1000, abs=1e-5)
    assert [r.arrival_ms for r in requests] == sorted(r.arrival_ms for r in requests)
    assert header.source["format"] == "vllm-bench" and header.source["file"] == str(VLLM)
    assert header.source["send_times"] == "the client's per-request send times"
    assert header.max_concurrency is None  # the run was open loop (max_concurrency null)


def test_sglang_bench_send_times_follow_the_recorded_rate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = json.loads(SGLANG.read_text().strip().splitlines()[-1])
    header, requests = imported(capsys, "sglang-bench", SGLANG, tmp_path)
    assert len(requests) == data["completed"] == 200
    assert [r.prompt_tokens for r in requests] == data["input_lens"]
    assert [r.max_output_tokens for r in requests] == data["output_lens"]
    # no send times in the file: Poisson at the recorded 8 req/s from sglang's default seed 1
    expected = [s * 1000 for s in send_times_s(200, data["request_rate"], 1.0, 1)]
    assert [r.arrival_ms for r in requests] == pytest.approx(expected, abs=1e-6)
    assert requests[-1].arrival_ms == pytest.approx(200 / 8.0 * 1000)
    assert "regenerated" in header.source["send_times"] and "8 req/s" in header.source["send_times"]


def test_aiperf_send_times_and_lengths_are_the_records(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    records = [json.loads(line) for line in AIPERF.read_text().splitlines() if line.strip()]
    header, requests = imported(capsys, "aiperf", AIPERF, tmp_path)
    assert len(requests) == len(records) == 80
    first = min(r["metadata"]["request_start_ns"] for r in records)
    by_id = {r.id: r for r in requests}
    for rec in records:
        meta, metrics = rec["metadata"], rec["metrics"]
        r = by_id[f"ap-{meta['conversation_id']}:{meta['turn_index']}"]
        assert r.prompt_tokens == metrics["input_sequence_length"]["value"]
        assert r.max_output_tokens == metrics["output_sequence_length"]["value"]
        assert r.arrival_ms == pytest.approx((meta["request_start_ns"] - first) / 1e6, abs=1e-6)
    assert header.source["format"] == "aiperf" and header.max_concurrency is None
    assert header.source["issue_mode"].startswith("open loop")


def test_genai_perf_send_times_are_the_files_and_lengths_inferred(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = json.loads(GENAI.read_text())["experiments"][0]["requests"]
    summary = json.loads((GENAI_DIR / "profile_export_genai_perf.json").read_text())
    header, requests = imported(capsys, "genai-perf", GENAI, tmp_path)
    assert len(requests) == len(data) == 80
    sends = sorted(r["timestamp"] for r in data)
    assert [r.arrival_ms for r in requests] == pytest.approx([(t - sends[0]) / 1e6 for t in sends], abs=1e-6)
    # every request streamed 64 one-token chunks (SOURCES.txt: max_tokens 64, finish_reason length)
    assert {r.max_output_tokens for r in requests} == {64}
    mean_isl = summary["input_sequence_length"]["avg"]
    assert sum(r.prompt_tokens for r in requests) / 80 == pytest.approx(mean_isl, rel=0.01)
    assert header.source["prompt_tokens"].startswith("inferred")


# -- failed requests, as each tool writes them ---------------------------------------


def _vllm_failed(tmp_path: Path) -> Path:
    """vllm bench serve: a failed request has its error text, output_len 0, ttft 0, no itls."""
    data = json.loads(VLLM.read_text())
    data["errors"][3] = "ClientConnectorError: Cannot connect to host 127.0.0.1:8000"
    data["output_lens"][3], data["ttfts"][3], data["itls"][3] = 0, 0.0, []
    data["latencies"][3], data["generated_texts"][3] = 0.0, ""
    data["completed"], data["failed"] = 199, 1
    path = tmp_path / "vllm_failed.json"
    path.write_text(json.dumps(data))
    return path


def _sglang_failed(tmp_path: Path) -> Path:
    line = SGLANG.read_text().strip().splitlines()[-1]
    data = json.loads(line)
    data["errors"][3] = "Traceback (most recent call last):\n  ...\nClientConnectorError"
    data["output_lens"][3], data["ttfts"][3], data["itls"][3], data["generated_texts"][3] = 0, 0.0, [], ""
    data["completed"] = 199
    path = tmp_path / "sglang_failed.jsonl"
    path.write_text(json.dumps(data) + "\n")
    return path


def _aiperf_failed(tmp_path: Path) -> Path:
    """aiperf: the record carries ``error`` {code, type, message} and no output metrics."""
    directory = tmp_path / "aiperf_failed"
    shutil.copytree(AIPERF_DIR, directory)
    lines = AIPERF.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["error"] = {"code": 500, "type": "Internal Server Error", "message": "mock failure"}
    rec["metrics"] = {k: v for k, v in rec["metrics"].items() if k in ("input_sequence_length", "request_latency")}
    lines[3] = json.dumps(rec)
    (directory / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    return directory / "profile_export.jsonl"


def _genai_failed(tmp_path: Path) -> Path:
    """perf_analyzer: the failed request's only response is the server's error body."""
    directory = tmp_path / "genai_failed"
    shutil.copytree(GENAI_DIR, directory)
    data = json.loads(GENAI.read_text())
    req = data["experiments"][0]["requests"][3]
    req["response_timestamps"] = req["response_timestamps"][:1]
    req["response_outputs"] = [{"response": "Internal Server Error"}]
    (directory / "profile_export.json").write_text(json.dumps(data))
    return directory / "profile_export.json"


@pytest.mark.parametrize(
    ("fmt", "make", "total"),
    [
        ("vllm-bench", _vllm_failed, 200),
        ("sglang-bench", _sglang_failed, 200),
        ("aiperf", _aiperf_failed, 80),
        ("genai-perf", _genai_failed, 80),
    ],
)
def test_a_failed_request_is_skipped_and_counted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str, make: Any, total: int
) -> None:
    path = make(tmp_path)
    out = tmp_path / "w.json"
    code, stdout, stderr = run_import(capsys, fmt, path, out)
    assert code == 0, stderr
    assert f"imported {total - 1} requests" in stdout and "1 skipped" in stdout
    assert "failed request" in stderr
    workload = read_workload(out)
    requests = list(workload.requests)
    assert len(requests) == total - 1
    skipped = workload.header.source["skipped"]
    assert list(skipped) == ["failed request (the client recorded an error)"]
    assert skipped["failed request (the client recorded an error)"]["count"] == 1
    assert workload.header.source["rows"] == total


def test_closed_loop_runs_keep_their_concurrency(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = json.loads(VLLM.read_text())
    data["max_concurrency"] = 4
    path = tmp_path / "closed.json"
    path.write_text(json.dumps(data))
    header, requests = imported(capsys, "vllm-bench", path, tmp_path)
    assert header.max_concurrency == 4 and header.source["max_concurrency"] == 4
    assert len(requests) == 200


def test_vllm_without_send_times_regenerates_them_from_rate_and_burstiness(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = json.loads(VLLM.read_text())
    del data["start_times"]
    data["burstiness"] = 0.5
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    header, requests = imported(capsys, "vllm-bench", path, tmp_path)
    expected = [s * 1000 for s in send_times_s(200, 8.0, 0.5, 0)]
    assert [r.arrival_ms for r in requests] == pytest.approx(expected, abs=1e-6)
    assert "burstiness 0.5, seed 0" in header.source["send_times"]


def test_an_infinite_rate_sends_everything_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = SGLANG.read_text().strip().splitlines()[-1].replace('"request_rate": 8.0', '"request_rate": Infinity')
    path = tmp_path / "inf.jsonl"
    path.write_text(text + "\n")
    _, requests = imported(capsys, "sglang-bench", path, tmp_path)
    assert {r.arrival_ms for r in requests} == {0.0}


# -- garbage ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        ("vllm-bench", '{"completed": 2, "ttfts": [0.1, 0.2], "output_lens": [3]}', "output_lens"),
        ("vllm-bench", '{"completed": 2, "duration": 1.0}', "no per-request records"),
        ("sglang-bench", '{"backend": "vllm", "completed": 1, "ttfts": [0.1], "output_lens": [-1]}\n', "[0]"),
        ("aiperf", '{"metadata": {"request_start_ns": "soon"}, "metrics": {}}\n', "request_start_ns"),
        ("genai-perf", '{"experiments": [{"requests": [{"timestamp": -5}]}]}', "timestamp"),
        ("genai-perf", "not json", ""),
    ],
)
def test_garbage_is_one_located_line_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str, text: str, expected: str
) -> None:
    path = tmp_path / "garbage.json"
    path.write_text(text)
    out = tmp_path / "w.json"
    code, _, stderr = run_import(capsys, fmt, path, out)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], stderr
    assert "Traceback" not in stderr
    assert not out.exists()


def test_the_readers_are_listed() -> None:
    names = set(get_registry().names("workload_reader"))
    assert {"vllm-bench", "sglang-bench", "aiperf", "genai-perf"} <= names
