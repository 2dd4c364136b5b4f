"""The timed report's latency block beyond TTFT/TPOT/e2e (issue 20): inter-token gaps
(``latency.itl_ms``), queue wait in ms (``latency.queue_ms``, each outcome's
``admitted_ms``) and the timing model with its resolved parameters (``inputs.timing``).

``itl_ms`` is folded from the step records and outcomes (docs/report.md, "Inter-token
latency"); here it is checked against the gaps computed the long way, from every
request's token times in a trace, for each scheduler, with room to spare and under
pressure, and shown to differ where docs/report.md says it is approximate.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import POLICIES
from tickgate.seed.scheduler import SeedScheduler
from tickgate.interfaces.model import Request
from tickgate.host.policy import load_policy
from tickgate.replay.report import distribution
from tickgate.simulate import replay

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


def token_times(trace: Path, prompts: dict[str, int]) -> dict[str, list[float]]:
    """Every request's token times (the end of each step that sampled one), the long way: from
    a trace of single steps (a span's steps are given its mean). Besides ``decoded``, a step
    samples SGLang's prefilled requests (its ``scheduled`` but the one still chunked) and
    TensorRT-LLM's finished contexts (their chunks add up to the prompt, plus the tokens a
    paused request had generated)."""
    times: dict[str, list[float]] = defaultdict(list)
    context: dict[str, int] = defaultdict(int)
    target = dict(prompts)
    clock = 0.0
    for line in trace.read_text().splitlines():
        r = json.loads(line)
        detail = r.get("detail") or {}
        sampled = list(r["decoded"])
        if detail.get("batch") == "prefill":
            sampled = [i for i in detail["scheduled"] if i != detail.get("chunked")]
        if "context_chunks" in detail or "batch_tokens" in detail:  # TensorRT-LLM: pauses come first
            for i in r["preempted"]:
                context[i], target[i] = 0, prompts[i] + len(times[i])
        for i, n in (detail.get("context_chunks") or {}).items():
            context[i] += n
            if context[i] == target[i]:
                sampled.append(i)
        step = r["duration_ms"] / r["span"]
        for k in range(r["span"]):
            for i in sampled:
                times[i].append(clock + step * (k + 1))
        clock += r["duration_ms"]
    return times


def long_way(trace: Path, report: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The gaps' distribution from every request's token times, and whether every request
    sampled as many tokens as its outcome says (the reconstruction saw every token)."""
    done = [o for o in report["outcomes"] if o["status"] == "completed"]
    times = token_times(trace, {o["id"]: o["prompt_tokens"] for o in report["outcomes"]})
    gaps = [b - a for o in done for a, b in zip(times[o["id"]], times[o["id"]][1:])]
    return distribution(gaps, 3), all(len(times[o["id"]]) == o["output_tokens"] for o in done)


def run_traced(tmp_path: Path, requests: list[Request], pol: Any, **kw: Any) -> tuple[dict[str, Any], Path]:
    trace = tmp_path / "t.jsonl"
    return replay(requests, pol, trace_path=trace, **kw), trace


def same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal up to the microsecond: the report groups gaps at the microsecond (docs/report.md)."""
    assert got["count"] == want["count"]
    for key in ("mean", "p50", "p90", "p95", "p99", "max"):
        assert got[key] == pytest.approx(want[key], abs=1.5e-3), key


@pytest.fixture
def no_seed_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SeedScheduler, "fast_forward", False)


# -- inter-token latency ------------------------------------------------------------------------------

#: case -> (scheduler, options over ROOMY's, Poisson traffic: requests, mean gap ms, max prompt, max output)
EXACT: dict[str, tuple[str, dict[str, Any], tuple[int, float, int, int]]] = {
    **{name: (name, {}, (60, 20.0, 600, 60)) for name in ROOMY},
    # the seed's round-robin: more requests active than decode in a step
    "seed-round-robin": ("seed", {"decode_batch_width": 4}, (60, 20.0, 600, 60)),
    # vLLM: recompute preemption under KV pressure (the resumed request's token is listed)
    "vllm-v1-preempting": ("vllm-v1", {"num_gpu_blocks": 60}, (60, 20.0, 600, 60)),
    # TensorRT-LLM: generation left out of full micro-batches; chunked contexts; paused requests
    "trtllm-small-batch": ("trtllm", {"max_batch_size": 4}, (60, 20.0, 600, 60)),
    "trtllm-chunked-context": ("trtllm", {"enable_chunked_context": True, "max_num_tokens": 256},
                               (60, 20.0, 600, 60)),
    "trtllm-pausing": ("trtllm", {"kv_cache_blocks": 60, "capacity_scheduler_policy": "MAX_UTILIZATION"},
                       (60, 20.0, 600, 60)),
    # SGLang: prefill batches in a row (bursts, chunked prompts); retraction, unchunked recompute
    "sglang-tight": ("sglang", {"max_total_tokens": 3000}, (60, 20.0, 600, 60)),
    "sglang-retracting": ("sglang", {"max_total_tokens": 1000, "chunked_prefill_size": 4096},
                          (60, 10.0, 300, 200)),
}


def exact_case(tmp_path: Path, name: str, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    scheduler, over, (n, gap, prompt, output) = EXACT[name]
    pol = policy(tmp_path, scheduler, {**ROOMY[scheduler][1], **over})
    report, trace = run_traced(tmp_path, poisson(seed, n, gap, prompt, output), pol)
    want, complete = long_way(trace, report)
    assert complete and want is not None
    return report, want


@pytest.mark.parametrize("name", sorted(EXACT))
@pytest.mark.parametrize("seed", [1, 2])
def test_itl_is_every_gap_between_consecutive_tokens(tmp_path: Path, name: str, seed: int,
                                                     no_seed_spans: None) -> None:
    """Single steps: exact (to the microsecond), one gap per output token after each request's
    first, whatever waited (preempted, paused, retracted, left out of a batch, its turn)."""
    report, want = exact_case(tmp_path, name, seed)
    same(report["latency"]["itl_ms"], want)
    done = [o for o in report["outcomes"] if o["status"] == "completed"]
    assert want["count"] == sum(o["output_tokens"] - 1 for o in done)


@pytest.mark.parametrize("name", ["vllm-v1-preempting", "trtllm-pausing", "sglang-retracting",
                                  "seed-round-robin", "sglang"])
def test_the_cases_that_wait_are_what_they_claim(tmp_path: Path, name: str, no_seed_spans: None) -> None:
    """The cases above do wait: some gaps are far longer than any step."""
    report, want = exact_case(tmp_path, name, 1)
    steps = [t["duration_ms"] for t in report["ticks"]]
    assert want["max"] > 2 * max(steps)
    if name != "seed-round-robin" and name != "sglang":
        assert report["requests"]["preemptions"] > 0


def test_sglang_prefill_batches_pause_decoding(tmp_path: Path) -> None:
    """SGLang runs a prefill batch or a decode batch: a running request's next token waits for
    a prefill batch that runs in between."""
    reqs = [Request(id="a", prompt_tokens=100, max_output_tokens=5, arrival_ms=0.0),
            Request(id="b", prompt_tokens=300, max_output_tokens=3, arrival_ms=14.0)]
    report, trace = run_traced(tmp_path, reqs, policy(tmp_path, *ROOMY["sglang"]))
    rows = [(json.loads(line)["detail"]["batch"], json.loads(line)["duration_ms"])
            for line in trace.read_text().splitlines()]
    kinds = [k for k, _ in rows]
    assert kinds == ["prefill", "decode", "decode", "prefill"] + ["decode"] * (len(rows) - 4)
    d = [ms for _, ms in rows]
    # a: tokens at the ends of steps 0, 1, 2, 4, 5; b: 3, 4, 5
    want = distribution([d[1], d[2], d[3] + d[4], d[5], d[4], d[5]], 3)
    assert report["latency"]["itl_ms"] == want
    assert want["max"] == round(d[3] + d[4], 3) > round(max(d), 3)  # the paused gap is no step's duration


def test_a_recompute_chunked_over_steps_splits_its_two_gaps_elsewhere(tmp_path: Path) -> None:
    """SGLang: the token a retracted request samples when its recompute ends is placed at the end of
    the step that admitted it again; chunked, it comes later. The two gaps around it keep their sum."""
    pol = policy(tmp_path, "sglang", {**ROOMY["sglang"][1], "max_total_tokens": 1000,
                                      "chunked_prefill_size": 256})
    report, trace = run_traced(tmp_path, poisson(1, 60, 10.0, 300, 200), pol)
    want, complete = long_way(trace, report)
    got = report["latency"]["itl_ms"]
    assert complete and report["requests"]["preemptions"] > 0
    assert got["count"] == want["count"] and got["mean"] == want["mean"]
    assert got != want


def test_vllm_spans_price_each_token_at_the_spans_mean(tmp_path: Path) -> None:
    """A span of identical decode steps stands for its steps at their mean: with no cost per
    context token every step of it costs the same, and spans change nothing."""
    reqs = poisson(4, 40, 30.0)
    scheduler, options = ROOMY["vllm-v1"]
    spans = {k: v for k, v in options.items() if k != "max_span"}
    flat = {**TIMING, "per_context_token_ms": 0.0}
    single = replay(reqs, policy(tmp_path, scheduler, options, flat, "a.yaml"))
    spanned = replay(reqs, policy(tmp_path, scheduler, spans, flat, "b.yaml"))
    assert max(t["span"] for t in spanned["ticks"]) > 5
    assert spanned["latency"]["itl_ms"] == single["latency"]["itl_ms"]


def test_a_spans_steps_grow_with_the_context(tmp_path: Path) -> None:
    """With a cost per context token a span's steps grow (linear: by ``per_context_token_ms`` x
    seqs each): the span gives them their mean, so the count and the mean are exact and a
    percentile moves by at most the growth over the span."""
    reqs = [Request(id="a", prompt_tokens=40, max_output_tokens=400, arrival_ms=0.0)]
    scheduler, options = ROOMY["vllm-v1"]
    timing = {**TIMING, "per_context_token_ms": 0.01}
    single = replay(reqs, policy(tmp_path, scheduler, options, timing, "a.yaml"))
    spanned = replay(reqs, policy(tmp_path, scheduler, {**options, "max_span": 100}, timing, "b.yaml"))
    got, want = spanned["latency"]["itl_ms"], single["latency"]["itl_ms"]
    assert [t["span"] for t in spanned["ticks"]][1:] == [100, 100, 100, 98, 1]  # the last step finishes
    assert got["count"] == want["count"] == 399 and got["mean"] == want["mean"]
    assert got != want
    for key in ("p50", "p90", "p95", "p99", "max"):
        assert abs(got[key] - want[key]) <= 0.01 * 99 / 2 + 1e-3


@pytest.mark.parametrize("per_context", [0.0, 0.01])
def test_seed_spans_and_single_steps_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           per_context: float) -> None:
    """The seed's spans often start with the first token of requests admitted the step before:
    their gaps in the span still add up to the steps after their first (its outcome's first token
    ends it)."""
    reqs = poisson(5, 40, 30.0)
    pol = policy(tmp_path, *ROOMY["seed"], {**TIMING, "per_context_token_ms": per_context})
    spanned = replay(reqs, pol)
    monkeypatch.setattr(SeedScheduler, "fast_forward", False)
    single = replay(reqs, pol)
    assert spanned["summary"]["total_ticks"] == single["summary"]["total_ticks"]
    assert len(spanned["ticks"]) < len(single["ticks"])
    got, want = spanned["latency"]["itl_ms"], single["latency"]["itl_ms"]
    if not per_context:
        assert got == want
    assert got["count"] == want["count"] and got["mean"] == pytest.approx(want["mean"], abs=1e-3)


def test_a_span_that_starts_with_a_first_token_keeps_the_total(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed: admitted at step 0, first token at step 1, which starts a span of 2 steps; its
    one gap in the span is the second step, not the span's mean."""
    reqs = [Request(id="a", prompt_tokens=1, max_output_tokens=3, arrival_ms=0.0)]
    pol = policy(tmp_path, "seed", {**ROOMY["seed"][1], "decode_batch_width": 1},
                 {**TIMING, "per_context_token_ms": 0.5})
    spanned = replay(reqs, pol)
    assert [t["span"] for t in spanned["ticks"]] == [1, 2, 1]
    monkeypatch.setattr(SeedScheduler, "fast_forward", False)
    single = replay(reqs, pol)
    steps = [t["duration_ms"] for t in single["ticks"]]
    assert single["latency"]["itl_ms"]["mean"] == round((steps[2] + steps[3]) / 2, 3)
    assert spanned["latency"]["itl_ms"]["mean"] == single["latency"]["itl_ms"]["mean"]
    assert spanned["latency"]["itl_ms"]["p50"] != single["latency"]["itl_ms"]["p50"]  # the span's mean


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 10**6), st.integers(1, 30), st.floats(1.0, 60.0), st.sampled_from(sorted(ROOMY)),
       st.sampled_from([40, 80, 4000]))
def test_itl_is_exact_on_random_traffic(tmp_path_factory: Any, seed: int, n: int, gap: float, name: str,
                                        kv: int) -> None:
    """Any scheduler, with room or under pressure (40 KV blocks/pages of 16 tokens; SGLang: 640
    tokens), single steps."""
    tmp_path = tmp_path_factory.mktemp("itl")
    scheduler, options = ROOMY[name]
    key = {"seed": "kv_pages", "vllm-v1": "num_gpu_blocks", "trtllm": "kv_cache_blocks",
           "sglang": "max_total_tokens"}[name]
    options = {**options, key: kv * 16 if name == "sglang" else kv}
    if name == "trtllm":
        options["capacity_scheduler_policy"] = "MAX_UTILIZATION"
    if name == "sglang":
        options["chunked_prefill_size"] = 4096  # a chunked recompute moves a gap (above)
    old = SeedScheduler.fast_forward
    SeedScheduler.fast_forward = False
    try:
        report, trace = run_traced(tmp_path, poisson(seed, n, gap, 300, 30),
                                   policy(tmp_path, scheduler, options))
    finally:
        SeedScheduler.fast_forward = old
    want, complete = long_way(trace, report)
    assert complete
    if want is None:  # every request produced one token, or none: no gaps
        assert report["latency"]["itl_ms"] is None
    else:
        same(report["latency"]["itl_ms"], want)


def test_a_span_alone_has_one_gap_per_token_after_the_first(tmp_path: Path) -> None:
    """One request: its first token is TTFT, then one gap per step (the seed samples the first
    token in a decode step, vLLM at the end of the prefill: the same figure)."""
    reqs = [Request(id="a", prompt_tokens=40, max_output_tokens=20, arrival_ms=0.0)]
    seed = replay(reqs, policy(tmp_path, *ROOMY["seed"], name="s.yaml"))
    vllm = replay(reqs, policy(tmp_path, "vllm-v1", {**ROOMY["vllm-v1"][1], "max_span": 64}, name="v.yaml"))
    for report in (seed, vllm):
        assert report["latency"]["itl_ms"]["count"] == 19
        assert any(t["span"] > 1 for t in report["ticks"])
    # the seed: admission, then 20 decode steps of 1 sequence
    steps = [t["duration_ms"] / t["span"] for t in seed["ticks"] for _ in range(t["span"])]
    assert seed["latency"]["itl_ms"]["max"] == round(max(steps[2:]), 3)


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
                            "series", "outcomes", "ticks"]
    assert "timing" not in report["plugins"]  # once, where the policy's other inputs are


def test_the_latency_block_in_order(tmp_path: Path) -> None:
    report = replay(poisson(2, 20, 10.0), load_policy(POLICIES / "vllm-v1-bench.yaml"))
    assert list(report["latency"]) == ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms", "busy_ms",
                                       "benchmark_duration_ms", "output_tokens_per_s", "requests_per_s",
                                       "busy_output_tokens_per_s"]
    itl, tpot = report["latency"]["itl_ms"], report["latency"]["tpot_ms"]
    # TPOT averages each request's gaps; ITL pools them: the same total over the same tokens
    done = [o for o in report["outcomes"] if o["status"] == "completed" and o["output_tokens"] > 1]
    total = sum(o["finished_ms"] - o["first_token_ms"] for o in done)
    assert itl["count"] == sum(o["output_tokens"] - 1 for o in done)
    assert itl["mean"] == pytest.approx(total / itl["count"], abs=1e-3)
    assert tpot["count"] == len(done)


@pytest.mark.parametrize("preset", ["sglang-default.yaml", "vllm-v1-bench.yaml"])
def test_the_sidecar_gives_the_same_latency(preset: str) -> None:
    """The summary computed in a forked child (``--sidecar``) folds the same gaps."""
    reqs = poisson(3, 80, 15.0)
    pol = load_policy(POLICIES / preset)
    here = replay(reqs, pol)
    there = replay(reqs, pol, sidecar=True)
    assert here == there and here["latency"]["itl_ms"]["count"] > 0
