"""``max_concurrency`` in a workload: closed-loop clients, at most N requests in flight.

A request is issued at its own arrival or when a slot frees (an earlier request completes or is
rejected), whichever is later, and carries that arrival: its TTFT counts from when the client sent
it, as ``vllm bench serve --max-concurrency`` measures. The window changes no scheduler, so the
fast paths (spans) must give exactly what single steps give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, POLICIES, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickgate.seed.scheduler import SeedScheduler
from tickgate.util.errors import PluginError
from tickgate.interfaces import Clock, Horizon
from tickgate.interfaces.model import Request, TickRecord
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.replay.engine import run
from tickgate.workload.sources import open_requests
from tickgate.workload.format import WorkloadHeader, read_workload, write_workload

TIMING = ("timing: {name: linear, options: {fixed_ms: 1.7, per_prefill_token_ms: 0.013, "
          "per_decode_seq_ms: 0.21, per_context_token_ms: 0.0011}}\n")


def seed_policy(tmp_path: Path, *, timed: bool, width: int = 8, pages: int = 400, budget: int = 512,
                name: str = "seed.yaml") -> Path:
    path = tmp_path / name
    path.write_text("version: 1\nscheduler:\n  name: seed\n"
                    f"  options: {{page_size: 16, kv_pages: {pages}, prefill_budget: {budget}, "
                    f"decode_batch_width: {width}, aging_ticks: 2}}\n" + (TIMING if timed else ""))
    return path


def vllm_policy(tmp_path: Path, *, timed: bool, max_span: int | None = None, blocks: int = 400) -> Path:
    path = tmp_path / f"vllm-{max_span}.yaml"
    span = f", max_span: {max_span}" if max_span is not None else ""
    path.write_text("version: 1\nscheduler:\n  name: vllm-v1\n"
                    f"  options: {{block_size: 16, num_gpu_blocks: {blocks}, max_num_seqs: 16, "
                    f"max_num_batched_tokens: 512, enable_chunked_prefill: true, "
                    f"enable_prefix_caching: true{span}}}\n" + (TIMING if timed else ""))
    return path


def requests(rows: list[tuple[int, int, int]], *, timed: bool, gap_ms: float = 2.5) -> list[Request]:
    """(prompt, output, arrival step) rows; timed arrivals are ``step * gap_ms``."""
    return [Request(id=f"r{i:03d}", prompt_tokens=p, max_output_tokens=o,
                    arrival_tick=0 if timed else t, arrival_ms=t * gap_ms if timed else None)
            for i, (p, o, t) in enumerate(rows)]


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["id"]: o for o in report["outcomes"]}


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """Everything but the per-record detail (a span is one record instead of several)
    and the inter-token gaps' figures but their count (a span gives each of its steps
    the span's mean gap, docs/report.md; tests/test_scale.py checks the rest)."""
    out = {k: v for k, v in report.items() if k not in ("ticks", "ticks_omitted")}
    # the series' clock inside a span takes its steps as equally long (docs/report.md, "Series")
    out["series"] = {k: v for k, v in out["series"].items() if k != "ms"}
    itl = out.get("latency", {}).get("itl_ms")
    if itl:
        out["latency"] = {**out["latency"], "itl_ms": itl["count"]}
    return out


ROWS = [(64, 6, 0), (200, 9, 0), (32, 3, 0), (96, 12, 1), (48, 5, 2), (300, 7, 40), (16, 20, 41), (80, 4, 41)]


# -- timed ---------------------------------------------------------------------------------------

def test_one_slot_issues_each_request_when_the_previous_finishes(tmp_path: Path) -> None:
    reqs = requests(ROWS, timed=True)
    report = replay(reqs, load_policy(seed_policy(tmp_path, timed=True)), max_concurrency=1, detail_limit=10**6)
    out = report["outcomes"]
    assert [o["id"] for o in out] == [r.id for r in reqs]  # one at a time, in workload order
    for before, o, r in zip(out, out[1:], reqs[1:]):
        # issued when the previous finished, or at its own arrival when that is later
        assert o["arrival_ms"] == max(r.arrival_ms, before["finished_ms"])
        assert o["arrival_ms"] <= o["first_token_ms"]
    # the request at 100 ms (row 5) waited for nobody: the window was empty by then
    late = by_id(report)["r005"]
    assert late["arrival_ms"] == 100.0 and by_id(report)["r004"]["finished_ms"] < 100.0
    # each ran alone: its TTFT counts from when it was issued, so waiting for the slot is not in it
    ttft = {o["id"]: o["first_token_ms"] - o["arrival_ms"] for o in out}
    alone = replay([reqs[1]], load_policy(seed_policy(tmp_path, timed=True)), detail_limit=10)["outcomes"][0]
    assert ttft["r001"] == pytest.approx(alone["first_token_ms"] - alone["arrival_ms"])
    # never two at once: active + queued of every record is at most 1
    assert max(t["active"] + t["queued"] for t in report["ticks"]) == 1
    assert report["latency"]["ttft_ms"]["max"] == pytest.approx(max(ttft.values()), abs=1e-6)


def test_without_the_window_the_same_requests_overlap(tmp_path: Path) -> None:
    """The control for the test above: the same workload open-loop queues several requests at once
    and times TTFT from their nominal arrivals."""
    report = replay(requests(ROWS, timed=True), load_policy(seed_policy(tmp_path, timed=True)), detail_limit=10**6)
    assert max(t["active"] + t["queued"] for t in report["ticks"]) > 1
    assert by_id(report)["r001"]["arrival_ms"] == 0.0
    assert "max_concurrency" not in report["inputs"]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("policy", ["seed", "vllm"])
def test_never_more_than_n_in_flight(tmp_path: Path, n: int, policy: str) -> None:
    rows = [(40 + (i * 37) % 300, 3 + (i * 7) % 19, i // 4) for i in range(40)]
    path = seed_policy(tmp_path, timed=True) if policy == "seed" else vllm_policy(tmp_path, timed=True)
    report = replay(requests(rows, timed=True, gap_ms=1.0), load_policy(path), max_concurrency=n,
                    detail_limit=10**6)
    in_flight = [t["active"] + t["queued"] for t in report["ticks"]]
    assert max(in_flight) == n  # reached, never passed
    assert report["requests"]["completed"] == 40
    # every request was issued at its own arrival or at a completion (closed loop)
    finished = {o["finished_ms"] for o in report["outcomes"]}
    nominal = {r.id: r.arrival_ms for r in requests(rows, timed=True, gap_ms=1.0)}
    for o in report["outcomes"]:
        assert o["arrival_ms"] == nominal[o["id"]] or o["arrival_ms"] in finished
        assert o["arrival_ms"] >= nominal[o["id"]]


@pytest.mark.parametrize("policy", ["sglang-default.yaml", "trtllm-max-utilization.yaml"])
def test_other_engine_mirrors_keep_the_window(policy: str) -> None:
    stream, inputs = open_requests(FIXTURES / "scenarios" / "kv-pressure.json")
    report = replay(stream, load_policy(POLICIES / policy), inputs=inputs, max_concurrency=3, detail_limit=10**6)
    assert max(t["active"] + t["queued"] for t in report["ticks"]) <= 3
    assert report["inputs"]["max_concurrency"] == 3
    assert report["requests"]["completed"] + report["requests"]["rejected"] == report["summary"]["request_count"]


def test_a_rejection_frees_its_slot_at_the_start_of_its_step(tmp_path: Path) -> None:
    # r001 needs 63 pages of a 20-page cache: rejected on arrival, reported by the next step
    reqs = requests([(64, 4, 0), (1000, 8, 0), (32, 3, 0)], timed=True)
    report = replay(reqs, load_policy(seed_policy(tmp_path, timed=True, pages=20)), max_concurrency=1,
                    detail_limit=100)
    out = by_id(report)
    assert out["r001"]["status"] == "rejected"
    assert out["r001"]["arrival_ms"] == out["r000"]["finished_ms"]
    rejecting = next(t for t in report["ticks"] if t["rejected"] == ["r001"])
    start = sum(t["duration_ms"] for t in report["ticks"] if t["tick"] < rejecting["tick"])
    # (the report rounds outcome times to 3 decimals, record durations to 6)
    assert out["r002"]["arrival_ms"] == pytest.approx(start, abs=1e-3)
    assert out["r002"]["arrival_ms"] == out["r000"]["finished_ms"]  # nothing ran between them
    assert out["r002"]["arrival_tick"] == rejecting["tick"] + 1  # it joins the queue at the next step


# -- untimed -------------------------------------------------------------------------------------

def test_untimed_one_slot_arrives_the_step_after_the_previous_finished(tmp_path: Path) -> None:
    reqs = requests(ROWS, timed=False)
    report = replay(reqs, load_policy(seed_policy(tmp_path, timed=False)), max_concurrency=1, detail_limit=10**6)
    out = report["outcomes"]
    for before, o, r in zip(out, out[1:], reqs[1:]):
        assert o["arrival_tick"] == max(r.arrival_tick, before["finished_tick"] + 1)
    assert by_id(report)["r005"]["arrival_tick"] == 40  # the window was empty before its arrival
    assert max(t["active"] + t["queued"] for t in report["ticks"]) == 1


def test_untimed_two_slots(tmp_path: Path) -> None:
    reqs = requests([(32, 5, 0), (32, 9, 0), (32, 2, 0), (32, 2, 0), (32, 2, 0)], timed=False)
    report = replay(reqs, load_policy(seed_policy(tmp_path, timed=False)), max_concurrency=2, detail_limit=100)
    out = by_id(report)
    assert out["r000"]["arrival_tick"] == out["r001"]["arrival_tick"] == 0
    # r002 takes the slot r000 frees, r003 the one r002 frees (earlier than r001's), r004 r003's
    assert out["r002"]["arrival_tick"] == out["r000"]["finished_tick"] + 1
    assert out["r003"]["arrival_tick"] == out["r002"]["finished_tick"] + 1
    assert out["r004"]["arrival_tick"] == min(out["r003"]["finished_tick"], out["r001"]["finished_tick"]) + 1
    assert max(t["active"] + t["queued"] for t in report["ticks"]) == 2


# -- fast path = slow path -----------------------------------------------------------------------

_rows = st.lists(st.tuples(st.integers(1, 300), st.integers(1, 60), st.integers(0, 40)), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, n=st.integers(1, 6), timed=st.booleans(), width=st.integers(1, 8), pages=st.integers(20, 80))
def test_seed_spans_change_nothing_under_the_window(tmp_path: Path, rows: list[tuple[int, int, int]], n: int,
                                                    timed: bool, width: int, pages: int) -> None:
    rows = sorted(rows, key=lambda row: row[2])
    policy = load_policy(seed_policy(tmp_path, timed=timed, width=width, pages=pages))
    results = []
    for fast in (True, False):
        SeedScheduler.fast_forward = fast
        try:
            results.append(replay(requests(rows, timed=timed), policy, max_concurrency=n, detail_limit=10**6))
        finally:
            SeedScheduler.fast_forward = True
    assert comparable(results[0]) == comparable(results[1])


@pytest.mark.parametrize("timed", [True, False])
@pytest.mark.parametrize("n", [1, 4, 24])
def test_vllm_spans_change_nothing_under_the_window(tmp_path: Path, timed: bool, n: int) -> None:
    rows = [(50 + (i * 53) % 700, 8 + (i * 29) % 90, i // 3) for i in range(80)]
    reports = [replay(requests(rows, timed=timed, gap_ms=4.0), load_policy(vllm_policy(tmp_path, timed=timed,
                                                                                      max_span=span)),
                      max_concurrency=n, detail_limit=10**6)
               for span in (None, 1)]
    fast, slow = reports
    different = ("plugins", "inputs")  # the policy file and its max_span
    assert ({k: v for k, v in comparable(fast).items() if k not in different}
            == {k: v for k, v in comparable(slow).items() if k not in different})
    assert len(fast["ticks"]) < len(slow["ticks"])  # the fast path did take spans
    assert max(t["span"] for t in fast["ticks"]) > 1 == max(t["span"] for t in slow["ticks"])
    assert max(t["active"] + t["queued"] for t in fast["ticks"]) <= n


def test_spans_run_past_the_nominal_arrival_of_a_waiting_request(tmp_path: Path) -> None:
    """With the window full, the next request's own arrival bounds nothing: a decode span runs
    over it (the request cannot arrive before a completion)."""
    reqs = requests([(64, 40, 0), (64, 5, 1)], timed=True)  # r001 nominally at 2.5 ms
    report = replay(reqs, load_policy(seed_policy(tmp_path, timed=True)), max_concurrency=1, detail_limit=100)
    first_span = next(t for t in report["ticks"] if t["span"] > 1)
    assert first_span["span"] == 39  # r000's whole decode but its last (completing) step, in one record
    assert by_id(report)["r001"]["arrival_ms"] == by_id(report)["r000"]["finished_ms"]
    # open loop, r001 arrives during the prefill step (2.532 ms) and joins at the next one
    report = replay(reqs, load_policy(seed_policy(tmp_path, timed=True)), detail_limit=100)
    assert [(t["span"], t["admitted"]) for t in report["ticks"][:2]] == [(1, ["r000"]), (1, ["r001"])]


# -- the workload file ---------------------------------------------------------------------------

def _workload(tmp_path: Path, header: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"version": 1, **header}) [:-1] + ', "requests": [\n'
                    + ",\n".join(json.dumps(r) for r in rows) + "\n]}\n")
    return path


def test_the_header_reaches_the_replay_and_the_report(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "prompt_tokens": 32, "max_output_tokens": 4} for i in range(6)]
    path = _workload(tmp_path, {"max_concurrency": 2}, rows)
    assert read_workload(path).header.max_concurrency == 2
    out, trace = tmp_path / "r.json", tmp_path / "t.jsonl"
    res = run_cli("replay", "--input", str(path), "--output", str(out), "--trace", str(trace), "--quiet")
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["inputs"]["max_concurrency"] == 2
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert max(r["active"] + r["queued"] for r in records) == 2
    # the helper processes (prefetch, sidecar) give the same bytes
    res = run_cli("replay", "--input", str(path), "--output", str(tmp_path / "r1.json"), "--quiet",
                  env={"TICKGATE_PARALLEL": "1"})
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r1.json").read_bytes() == out.read_bytes()
    # the same file without the header line's max_concurrency: all six at once
    path = _workload(tmp_path, {}, rows)
    res = run_cli("replay", "--input", str(path), "--output", str(out), "--trace", str(trace), "--quiet")
    assert res.returncode == 0, res.stderr
    assert max(json.loads(line)["queued"] + json.loads(line)["active"] for line in trace.read_text().splitlines()) == 6


def test_write_workload_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    with path.open("w") as fh:
        write_workload(fh, WorkloadHeader(max_concurrency=7), [Request(id="a", prompt_tokens=3, max_output_tokens=2)])
    assert json.loads(path.read_text())["max_concurrency"] == 7
    assert read_workload(path).header.max_concurrency == 7


@pytest.mark.parametrize("value,message", [
    ("0", "$.max_concurrency: 0 is less than the minimum of 1"),
    ('"4"', "$.max_concurrency: '4' is not of type 'integer'"),
    ("2.0", "$.max_concurrency: 2.0 is not of type 'integer'"),
    ("null", "$.max_concurrency: None is not of type 'integer'"),
])
def test_a_bad_max_concurrency_is_a_located_error(tmp_path: Path, value: str, message: str) -> None:
    path = tmp_path / "w.json"
    path.write_text('{"version": 1,\n "max_concurrency": ' + value
                    + ',\n "requests": [{"id": "a", "prompt_tokens": 4, "max_output_tokens": 2}]}\n')
    res = run_cli("replay", "--input", str(path), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {path}:2:21: {message}"
    assert not (tmp_path / "r.json").exists()


def test_a_scheduler_that_loses_requests_is_named_not_a_hang() -> None:
    """Every slot held, nothing running, no outcome: the window would wait forever."""

    class Forgetful:
        def add(self, request: Request) -> None:
            pass

        def has_work(self) -> bool:
            return False

        def pop_outcomes(self) -> list[Any]:
            return []

        def step(self, horizon: Horizon) -> TickRecord:  # pragma: no cover - never asked
            raise AssertionError

    reqs = [Request(id=f"r{i}", prompt_tokens=4, max_output_tokens=2) for i in range(3)]
    with pytest.raises(PluginError, match=r"no work and reported no outcome .* 2 requests are in flight"):
        run(reqs, Forgetful(), Clock(), [], max_concurrency=2)  # type: ignore[arg-type]
