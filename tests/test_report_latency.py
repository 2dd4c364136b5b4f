"""The timed report (issue 20): queue wait in ms (``latency.queue_ms``, each outcome's
``admitted_ms``: the start of the step that first admitted it) and the timing model with
its resolved parameters (``inputs.timing``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tickgate.builtin.seed import SeedScheduler
from tickgate.model import Request
from tickgate.policy import load_policy
from tickgate.replay.report import distribution
from tickgate.replay.run import replay

TIMING = {"fixed_ms": 5.0, "per_prefill_token_ms": 0.03, "per_decode_seq_ms": 0.25,
          "per_context_token_ms": 0.001}

#: (scheduler, options) with room enough that nothing is preempted, paused or retracted
ROOMY = {
    "seed": ("seed", {"page_size": 16, "kv_pages": 4000, "prefill_budget": 1024, "decode_batch_width": 256}),
    "vllm-v1": ("vllm-v1", {"block_size": 16, "num_gpu_blocks": 4000, "max_num_seqs": 256,
                            "max_num_batched_tokens": 512, "max_span": 1}),
    "trtllm": ("trtllm", {"tokens_per_block": 16, "kv_cache_blocks": 4000, "max_batch_size": 256,
                          "max_num_tokens": 1024}),
    "sglang": ("sglang", {"page_size": 1, "max_total_tokens": 64000, "chunked_prefill_size": 512,
                          "max_running_requests": 256}),
}


def policy(tmp_path: Path, scheduler: str, options: dict[str, Any], timing: Any = TIMING,
           name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": scheduler, "options": options}}
    if timing is not None:
        doc["timing"] = timing
    path = tmp_path / name
    path.write_text(json.dumps(doc))  # JSON is YAML
    return load_policy(path)


def poisson(seed: int, n: int, mean_gap_ms: float, prompt: int = 600, output: int = 60) -> list[Request]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(1 / mean_gap_ms)
        out.append(Request(id=f"r{i:03d}", prompt_tokens=rng.randint(8, prompt),
                           max_output_tokens=rng.randint(1, output), arrival_ms=round(t, 3)))
    return out


def run_traced(tmp_path: Path, requests: list[Request], pol: Any, **kw: Any) -> tuple[dict[str, Any], Path]:
    trace = tmp_path / "t.jsonl"
    return replay(requests, pol, trace_path=trace, **kw), trace


@pytest.fixture
def no_seed_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SeedScheduler, "fast_forward", False)


# -- queue wait ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ROOMY))
def test_admitted_ms_is_the_start_of_the_admitting_step(tmp_path: Path, name: str,
                                                        no_seed_spans: None) -> None:
    report, trace = run_traced(tmp_path, poisson(7, 40, 8.0), policy(tmp_path, *ROOMY[name]))
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    duration = {r["tick"]: r["duration_ms"] for r in rows}
    done = [o for o in report["outcomes"] if o["status"] == "completed"]
    waits = []
    for o in done:
        assert o["arrival_ms"] <= o["admitted_ms"] <= o["first_token_ms"]
        assert o["admitted_tick"] in duration
        if o["first_token_tick"] == o["admitted_tick"]:  # the admitting step sampled the first token
            end = o["admitted_ms"] + duration[o["admitted_tick"]]
            assert o["first_token_ms"] == pytest.approx(end, abs=2e-3)
        waits.append(o["admitted_ms"] - o["arrival_ms"])
    assert any(o["first_token_tick"] == o["admitted_tick"] for o in done) == (name != "seed")
    assert report["latency"]["queue_ms"] == distribution(waits, 3)
    assert report["latency"]["queue_ms"]["max"] > 0


def test_queue_ms_under_load(tmp_path: Path) -> None:
    """Requests that arrive together wait for the steps that admit those before them."""
    reqs = [Request(id=f"r{i}", prompt_tokens=500, max_output_tokens=4, arrival_ms=0.0) for i in range(4)]
    report = replay(reqs, policy(tmp_path, "seed", {"page_size": 16, "kv_pages": 4000, "prefill_budget": 500,
                                                    "decode_batch_width": 8}))
    admitted = sorted(o["admitted_ms"] for o in report["outcomes"])
    assert admitted[0] == 0.0 and admitted == sorted(set(admitted))  # one admission per step
    queue = report["latency"]["queue_ms"]
    assert queue["count"] == 4 and queue["max"] == admitted[-1]


def test_untimed_reports_have_no_ms(tmp_path: Path) -> None:
    report = replay(poisson(1, 5, 10.0), policy(tmp_path, *ROOMY["seed"], timing={"fixed_ms": 1.0}))
    assert "admitted_ms" in report["outcomes"][0]
    untimed = replay([Request(id="a", prompt_tokens=10, max_output_tokens=3)],
                     policy(tmp_path, *ROOMY["seed"], timing=None, name="u.yaml"))
    assert "latency" not in untimed and "timing" not in untimed["inputs"]
    assert not any(k.endswith("_ms") for o in untimed["outcomes"] for k in o)


def test_rejected_requests_have_no_queue_wait(tmp_path: Path) -> None:
    reqs = [Request(id="big", prompt_tokens=10**6, max_output_tokens=2, arrival_ms=0.0),
            Request(id="ok", prompt_tokens=10, max_output_tokens=2, arrival_ms=1.0)]
    report = replay(reqs, policy(tmp_path, *ROOMY["seed"]))
    big = next(o for o in report["outcomes"] if o["id"] == "big")
    assert big["status"] == "rejected" and "admitted_ms" not in big
    assert report["latency"]["queue_ms"]["count"] == 1


# -- the timing model -------------------------------------------------------------------------------

@pytest.mark.parametrize("timing", [{"fixed_ms": 2.0}, {"name": "linear", "options": {"fixed_ms": 2.0}}])
def test_the_report_names_the_model_and_its_resolved_parameters(tmp_path: Path, timing: Any) -> None:
    report = replay(poisson(1, 5, 10.0), policy(tmp_path, *ROOMY["seed"], timing=timing))
    assert report["inputs"]["timing"] == {"name": "linear", "options": {
        "fixed_ms": 2.0, "per_prefill_token_ms": 0.0, "per_decode_seq_ms": 0.0, "per_context_token_ms": 0.0}}
    assert list(report) == ["summary", "pressure", "utilization", "requests", "latency", "inputs", "plugins",
                            "outcomes", "ticks"]
    assert "timing" not in report["plugins"]  # once, where the policy's other inputs are
