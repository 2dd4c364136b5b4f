"""Throughput over the client's window (issue 32, "One meaning per figure").

A replay report's ``output_tokens_per_s`` and ``requests_per_s`` are what a benchmark
client computes (``vllm bench serve``, ``sglang.bench_serving``, aiperf): completed
requests and their output tokens over the benchmark's duration, from the first send
to the last completion (``benchmark_duration_ms``); the engine's rate per busy second
is ``busy_output_tokens_per_s``. Checked here against the client's computation from
the report's own outcomes, for every scheduler and a fleet, and where the report is
read again: the sweep headline, the gate's reader, the HTML summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import POLICIES
from tickgate.host.policy import load_policy
from tickgate.html.views import replay_sections
from tickgate.interfaces.model import Request
from tickgate.readers.replay_report import ReplayReportMirror
from tickgate.simulate import replay
from tickgate.sweep.headline import metrics


def _requests(n: int, gap_ms: float, prompt: int = 256, output: int = 32) -> list[Request]:
    return [Request(id=f"r{i:04d}", prompt_tokens=prompt, max_output_tokens=output, arrival_ms=i * gap_ms)
            for i in range(n)]


def _client(report: dict[str, Any]) -> tuple[float, float, float]:
    """(duration ms, requests/s, output tokens/s) as vllm bench serve's calculate_metrics would
    compute them from these requests: successful ones only, from the first send to the last
    response, each response at send + its end-to-end latency (the front end's way included)."""
    frontend = report["inputs"]["timing"]["options"].get("frontend_ms", 0.0)
    outcomes = report["outcomes"]
    done = [o for o in outcomes if o["status"] == "completed"]
    start = min(o["arrival_ms"] for o in outcomes)
    end = max(o["arrival_ms"] + (o["finished_ms"] - o["arrival_ms"] + frontend) for o in done)
    seconds = (end - start) / 1000.0
    return end - start, len(done) / seconds, sum(o["output_tokens"] for o in done) / seconds


def test_an_open_loop_run_at_one_request_a_second_reports_one_request_a_second() -> None:
    """The issue's case: requests at 1 req/s reported 1.586 req/s (per busy second)."""
    report = replay(_requests(200, 1000.0), load_policy(POLICIES / "vllm-v1-bench.yaml"), detail_limit=1000)
    lat = report["latency"]
    assert lat["requests_per_s"] == pytest.approx(1.0, abs=0.01)
    assert lat["output_tokens_per_s"] == pytest.approx(32.0, abs=0.5)
    # the engine idles between arrivals: its own rate is far higher, and named as such
    assert lat["busy_output_tokens_per_s"] > 2 * lat["output_tokens_per_s"]
    assert lat["busy_output_tokens_per_s"] == pytest.approx(200 * 32 / (lat["busy_ms"] / 1000.0), rel=1e-3)


@pytest.mark.parametrize(
    "preset",
    ["vllm-v1-bench.yaml", "sglang-default.yaml", "trtllm-max-utilization.yaml", "fleet-round-robin.yaml",
     "fleet-pd.yaml"],
)
def test_the_report_throughput_is_the_clients(preset: str) -> None:
    """Every scheduler and a fleet (roofline timing: a front end's way in and out counts)."""
    report = replay(_requests(120, 40.0, prompt=900, output=80), load_policy(POLICIES / preset), detail_limit=1000)
    lat = report["latency"]
    duration, rps, tps = _client(report)
    assert lat["benchmark_duration_ms"] == pytest.approx(duration, abs=1e-3)
    assert lat["requests_per_s"] == pytest.approx(rps, abs=1e-3)
    assert lat["output_tokens_per_s"] == pytest.approx(tps, abs=1e-3)


def test_a_closed_loop_window_starts_at_the_first_send(tmp_path: Path) -> None:
    """max_concurrency: requests due at 0 are sent as slots free; the window is the client's."""
    report = replay(_requests(60, 0.0), load_policy(POLICIES / "vllm-v1-bench.yaml"), max_concurrency=4,
                    detail_limit=1000)
    duration, rps, _ = _client(report)
    assert report["latency"]["benchmark_duration_ms"] == pytest.approx(duration, abs=1e-3)
    assert report["latency"]["requests_per_s"] == pytest.approx(rps, abs=1e-3)


def _tiny_pool(tmp_path: Path) -> Any:
    path = tmp_path / "tiny.yaml"
    path.write_text("version: 1\nscheduler:\n  name: seed\n  options: {page_size: 16, kv_pages: 8, "
                    "prefill_budget: 128, decode_batch_width: 2}\ntiming: {fixed_ms: 5.0}\n")
    return load_policy(path)


def test_a_rejected_first_request_still_opens_the_window(tmp_path: Path) -> None:
    """The client sent it: vllm bench's duration starts before it, whatever became of it."""
    reqs = [Request(id="huge", prompt_tokens=4096, max_output_tokens=4, arrival_ms=0.0),
            *(Request(id=f"r{i}", prompt_tokens=16, max_output_tokens=4, arrival_ms=1000.0 + 10 * i)
              for i in range(5))]
    report = replay(reqs, _tiny_pool(tmp_path), detail_limit=100)
    assert report["requests"]["rejected"] == 1
    last = max(o["finished_ms"] for o in report["outcomes"] if o["status"] == "completed")
    assert report["latency"]["benchmark_duration_ms"] == pytest.approx(last, abs=1e-3)
    assert report["latency"]["requests_per_s"] == pytest.approx(5 / (last / 1000.0), abs=1e-3)


def test_without_a_completion_there_is_no_window(tmp_path: Path) -> None:
    reqs = [Request(id=f"huge{i}", prompt_tokens=4096, max_output_tokens=4, arrival_ms=10.0 * i) for i in range(3)]
    lat = replay(reqs, _tiny_pool(tmp_path), detail_limit=100)["latency"]
    assert lat["benchmark_duration_ms"] is None
    assert lat["output_tokens_per_s"] is None and lat["requests_per_s"] is None


def test_the_sweep_headline_carries_the_clients_throughput() -> None:
    report = replay(_requests(50, 100.0), load_policy(POLICIES / "vllm-v1-bench.yaml"), detail_limit=1000)
    m = metrics(report)
    assert m["output_tokens_per_s"] == report["latency"]["output_tokens_per_s"]
    assert m["requests_per_s"] == report["latency"]["requests_per_s"]
    assert "busy_output_tokens_per_s" not in m


def _read(tmp_path: Path, report: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    return ReplayReportMirror().read(path)["run"]


def test_the_gate_reads_the_clients_throughput(tmp_path: Path) -> None:
    report = replay(_requests(50, 100.0), load_policy(POLICIES / "vllm-v1-bench.yaml"), detail_limit=1000)
    lat = report["latency"]
    agg = _read(tmp_path, report)["aggregates"]
    assert agg["request_throughput"] == lat["requests_per_s"]
    assert agg["output_throughput"] == lat["output_tokens_per_s"]
    assert agg["duration_s"] == pytest.approx(lat["benchmark_duration_ms"] / 1000.0)
    assert agg["extra"] == {"busy_ms": lat["busy_ms"], "busy_output_tokens_per_s": lat["busy_output_tokens_per_s"]}


def test_an_older_reports_busy_throughput_is_not_read_as_the_clients(tmp_path: Path) -> None:
    """Reports written before the window carry figures per busy second: named so, not compared."""
    report = replay(_requests(50, 100.0), load_policy(POLICIES / "vllm-v1-bench.yaml"), detail_limit=1000)
    lat = report["latency"]
    del lat["benchmark_duration_ms"], lat["busy_output_tokens_per_s"]
    run = _read(tmp_path, report)
    assert "output_throughput" not in run["aggregates"] and "request_throughput" not in run["aggregates"]
    assert run["aggregates"]["extra"]["busy_requests_per_s"] == lat["requests_per_s"]
    assert any("per busy second" in n for n in run["provenance"]["notes"])


def _summary_rows(report: dict[str, Any]) -> dict[str, Any]:
    table = replay_sections(report)[0].tables[0]
    return {row[0]: row[1] for row in table.rows}


def test_the_html_summary_names_each_throughput() -> None:
    report = replay(_requests(50, 100.0), load_policy(POLICIES / "vllm-v1-bench.yaml"), detail_limit=1000)
    lat = report["latency"]
    rows = _summary_rows(report)
    assert rows["requests/s"] == lat["requests_per_s"] and rows["output tokens/s"] == lat["output_tokens_per_s"]
    assert rows["output tokens per busy second"] == lat["busy_output_tokens_per_s"]
    del lat["benchmark_duration_ms"], lat["busy_output_tokens_per_s"]  # an older report
    old = _summary_rows(report)
    assert "requests/s" not in old and old["requests per busy second"] == lat["requests_per_s"]
