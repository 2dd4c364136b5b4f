"""The serial front end ahead of the engine (roofline's frontend_request_us /
frontend_token_us; docs/timing.md, "The front end")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tickgate.interfaces.model import Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay

SEED = ("version: 1\nscheduler:\n  name: seed\n  options: {page_size: 16, kv_pages: 4000, prefill_budget: 4096, "
        "decode_batch_width: 64}\n")


def policy(tmp_path: Path, **factors: float) -> Any:
    options = {"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB", "engine": "generic", **factors}
    path = tmp_path / f"p{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(SEED + "timing: " + json.dumps({"name": "roofline", "options": options}) + "\n")
    return load_policy(path)


def requests(arrivals: list[float], output: int = 10) -> list[Request]:
    return [Request(id=f"r{i}", prompt_tokens=64, max_output_tokens=output, arrival_ms=a)
            for i, a in enumerate(arrivals)]


def test_a_busy_front_end_admits_requests_one_service_time_apart(tmp_path: Path) -> None:
    # 10 output tokens at 1 ms each, plus 2 ms per request: the front end needs 12 ms a request
    report = replay(requests([0.0] * 5), policy(tmp_path, frontend_token_us=1000.0, frontend_request_us=2000.0),
                    detail_limit=100)
    out = report["outcomes"]
    assert [o["arrival_ms"] for o in out] == [0.0] * 5  # the client's arrival is kept
    admitted = [o["admitted_ms"] for o in out]
    for i, at in enumerate(admitted):
        assert at >= 12.0 * i  # it cannot reach the engine before the front end is free
    assert admitted[-1] == pytest.approx(48.0, abs=12.0)
    # the wait in the front end is in TTFT, as a client measures it
    assert out[4]["first_token_ms"] - out[4]["arrival_ms"] > 48.0
    assert report["latency"]["ttft_ms"]["max"] > 48.0


def test_a_front_end_with_time_to_spare_changes_nothing(tmp_path: Path) -> None:
    arrivals = [100.0 * i for i in range(8)]  # 100 ms apart; the front end needs 10 ms a request
    plain = replay(requests(arrivals), policy(tmp_path), detail_limit=100)
    fronted = replay(requests(arrivals), policy(tmp_path, frontend_token_us=1000.0), detail_limit=100)
    for report in (plain, fronted):
        report.pop("inputs")  # the policy file and its timing options
    assert plain == fronted


def test_without_a_front_end_requests_enter_when_they_arrive(tmp_path: Path) -> None:
    report = replay(requests([0.0] * 5), policy(tmp_path), detail_limit=100)
    assert {o["admitted_ms"] for o in report["outcomes"]} == {0.0}


def test_the_report_adds_the_way_in_and_out_to_ttft_and_end_to_end(tmp_path: Path) -> None:
    arrivals = [50.0 * i for i in range(6)]
    plain = replay(requests(arrivals), policy(tmp_path, frontend_ms=0.0), detail_limit=100)
    late = replay(requests(arrivals), policy(tmp_path, frontend_ms=100.0), detail_limit=100)
    assert late["outcomes"] == plain["outcomes"]  # the engine's times, unchanged
    for key in ("ttft_ms", "e2e_ms"):
        a, b = plain["latency"][key], late["latency"][key]
        for stat in ("mean", "p50", "p99", "max"):
            assert b[stat] == pytest.approx(a[stat] + 100.0, abs=1e-3)
    assert late["latency"]["itl_ms"] == plain["latency"]["itl_ms"]
