"""vllm-v1 decisions pinned across refactorings of the scheduler.

The values below were computed with the single-module ``v1_scheduler.py``
(commit 3e6f64d), before it was split into modules (docs/vllm.md, "Module
layout"); any later change in a decision, a tick or a per-request figure fails
here. Each case covers a path of the mirror: fcfs and priority, chunked
prefill off, prefix caching with eviction, preemption under pressure (with and
without prefix caching), ``max_model_len``, the long-prefill threshold and
the watermark, timed arrivals, and a timed Mooncake-like workload with shared
prefixes through the decode group. ``tests/test_scale.py`` pins the real
Mooncake trace; ``tests/test_vllm_conformance.py`` checks every step of the
17 recorded vLLM runs.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tickgate import Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate_vllm.conformance import load_reference_workload, scheduler_options

REPO = Path(__file__).resolve().parents[3]


REF = REPO / "fixtures" / "vllm-reference"
TIMING = {"fixed_ms": 5.0, "per_prefill_token_ms": 0.03, "per_decode_seq_ms": 0.25,
          "per_context_token_ms": 0.001}
BENCH = {"block_size": 16, "num_gpu_blocks": 2048, "max_num_seqs": 64, "max_num_batched_tokens": 2048,
         "enable_chunked_prefill": True, "enable_prefix_caching": True, "policy": "fcfs"}
BENCH_TIMING = {"fixed_ms": 6.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.1,
                "per_context_token_ms": 0.0002}


def _mooncake_like(n: int, seed: int) -> list[Request]:
    """Poisson arrivals in ms, prompts of 64-2048 tokens whose leading 16-token
    blocks are shared within one of 12 prefix families, outputs of 16-512."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(3.0) * 1000.0
        prompt = rng.randint(64, 2048)
        blocks = -(-prompt // 16)
        family = rng.randrange(12)
        shared = min(blocks, rng.randint(0, 40))
        ids = tuple(range(family * 10_000, family * 10_000 + shared)) + tuple(
            range(1_000_000 + i * 200, 1_000_000 + i * 200 + blocks - shared))
        out.append(Request(id=f"m{i}", prompt_tokens=prompt, max_output_tokens=rng.randint(16, 512),
                           arrival_ms=round(t, 3), prefix_blocks=ids))
    return out


def _reference(name: str, timed: bool = False, **over: Any) -> tuple[list[Request], dict[str, Any], Any]:
    requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
    if timed:
        requests = [Request(id=r.id, prompt_tokens=r.prompt_tokens, max_output_tokens=r.max_output_tokens,
                            priority=r.priority, prompt_token_ids=r.prompt_token_ids,
                            arrival_ms=r.arrival_tick * 7.3 + 0.37) for r in requests]
    return requests, {**scheduler_options(config), **over}, TIMING if timed else None


CASES: dict[str, Any] = {
    "fcfs-chunked": lambda: _reference("fcfs-chunked"),
    "priority-chunked": lambda: _reference("priority-chunked"),
    "fcfs-no-chunked": lambda: _reference("fcfs-no-chunked"),
    "priority-no-chunked": lambda: _reference("priority-no-chunked"),
    "prefix-fcfs": lambda: _reference("prefix-fcfs"),
    "prefix-priority-evict": lambda: _reference("prefix-priority-evict"),
    "prefix-no-chunked-pressure": lambda: _reference("prefix-no-chunked-pressure"),
    "pressure-preempt-fcfs": lambda: _reference("pressure-preempt-fcfs"),
    "pressure-preempt-priority": lambda: _reference("pressure-preempt-priority"),
    "max-model-len-cap": lambda: _reference("max-model-len-cap"),
    "long-prefill-threshold": lambda: _reference("long-prefill-threshold"),
    "watermark": lambda: _reference("watermark"),
    "pressure-preempt-fcfs-timed": lambda: _reference("pressure-preempt-fcfs", timed=True),
    "pressure-preempt-priority-timed": lambda: _reference("pressure-preempt-priority", timed=True),
    "max-model-len-cap-timed-span1": lambda: _reference("max-model-len-cap", timed=True, max_span=1),
    "mooncake-like-bench": lambda: (_mooncake_like(400, 11), BENCH, BENCH_TIMING),
    "mooncake-like-pressure": lambda: (_mooncake_like(300, 12), {**BENCH, "num_gpu_blocks": 400},
                                       BENCH_TIMING),
    "mooncake-like-priority-maxlen": lambda: (
        _mooncake_like(300, 13),
        {**BENCH, "num_gpu_blocks": 600, "policy": "priority", "max_model_len": 1800}, BENCH_TIMING),
}

# case -> (trace fingerprint, total ticks, digest of the outcomes and the scheduler summary)
PINNED = {
    "fcfs-chunked": ('a317ae5bb4607ed0', 896, '2943d636564731e5'),
    "fcfs-no-chunked": ('84b60adf8d00de40', 697, '26ae41a8ce0473b0'),
    "long-prefill-threshold": ('d2b106ad8383bb92', 496, 'cbc54b70ab9d046f'),
    "max-model-len-cap": ('d3753e6780724506', 685, '5475738e84f24f7a'),
    "max-model-len-cap-timed-span1": ('22be7816dc46ac14', 682, '16e40612eca2a7c9'),
    "mooncake-like-bench": ('0761f1d70458a470', 16204, '58757b0794511017'),
    "mooncake-like-pressure": ('86ceae077c0ac6e5', 18874, 'c44c69ab3cab4932'),
    "mooncake-like-priority-maxlen": ('382543b838824f2c', 13844, '6f5f17063c36a4ec'),
    "prefix-fcfs": ('1ec2ca5ba2d76aad', 345, '1e326d7f47959714'),
    "prefix-no-chunked-pressure": ('2f5d266b16c1aef2', 1247, '1435637516fd51dc'),
    "prefix-priority-evict": ('71489368c316fb13', 1116, '9f03cc3e351ca929'),
    "pressure-preempt-fcfs": ('060f8f3ab4c17520', 4055, '499d579743d923d8'),
    "pressure-preempt-fcfs-timed": ('9a0d92dc034f029a', 4055, '32e75a1f7acb05dc'),
    "pressure-preempt-priority": ('81a9e106de8e9e81', 3905, 'f2f272fb2ad170f6'),
    "pressure-preempt-priority-timed": ('e8fc6ee4c1460595', 3898, 'e27376ab417de92e'),
    "priority-chunked": ('2635f05000484567', 1314, '1784f5c10f3628a1'),
    "priority-no-chunked": ('e6975a847add3113', 761, '8e313369f057ab5f'),
    "watermark": ('c9862413a7fa8abb', 1699, '7468941b47c5bae3'),
}


def observed(name: str, tmp_path: Path) -> tuple[str, int, str]:
    requests, options, timing = CASES[name]()
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "vllm-v1", "options": options}}
    if timing:
        doc["timing"] = timing
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    block_ids = requests[0].prefix_blocks is not None
    report = replay(requests, load_policy(path), inputs={"block_size": 16} if block_ids else None,
                    prefix_block_size=16 if block_ids else None)
    # admitted_ms came after these pins (issue 20: queue wait in ms); the figures they pin must not move
    outcomes = [{k: v for k, v in o.items() if k != "admitted_ms"} for o in report["outcomes"]]
    digest = hashlib.sha256(json.dumps([outcomes, report["scheduler"]], sort_keys=True).encode())
    return report["summary"]["trace_fingerprint"], report["summary"]["total_ticks"], digest.hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(CASES))
def test_decisions_are_pinned(name: str, tmp_path: Path) -> None:
    assert observed(name, tmp_path) == PINNED[name]
