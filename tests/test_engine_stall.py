"""A replay whose scheduler can never make progress stops with a located error instead of
computing an endless span.

The case (found by random workloads against vllm-v1): priority policy, chunked prefill off. The
low-priority request is preempted once its prompt plus output exceeds max_num_batched_tokens; its
recompute can then never be scheduled in one step, nothing else runs, and the steady-state span
that fast-forwards the idle steps had no bound: the replay never returned.
"""

from __future__ import annotations

import json

from conftest import run_cli

WORKLOAD = {"version": 1, "requests": [
    {"id": "a", "prompt_tokens": 90, "max_output_tokens": 50, "priority": 1, "arrival_ms": 0.0},
    {"id": "b", "prompt_tokens": 20, "max_output_tokens": 60, "priority": 0, "arrival_ms": 10.0},
]}
POLICY = """version: 1
scheduler:
  name: vllm-v1
  options: {block_size: 16, num_gpu_blocks: 10, max_num_seqs: 4, max_num_batched_tokens: 100,
            enable_chunked_prefill: false, enable_prefix_caching: false, policy: priority}
timing: {fixed_ms: 5.0}
limits: {max_ticks: 200000}
"""


def test_a_request_that_can_never_be_rescheduled_stops_the_replay(tmp_path):
    work, policy, out = tmp_path / "w.json", tmp_path / "p.yaml", tmp_path / "r.json"
    work.write_text(json.dumps(WORKLOAD))
    policy.write_text(POLICY)
    result = run_cli("replay", "--input", str(work), "--policy", str(policy), "--output", str(out))
    assert result.returncode == 2
    assert "no progress for" in result.stderr and "1 requests queued, 0 active" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
