"""A replay whose policy can never make progress stops with a located error instead of
computing an endless span.

The case was found by random workloads against vllm-v1 (priority, chunked prefill off, a
preempted request whose recompute could never fit one step). vLLM itself refuses that
configuration at start-up, and so does the mirror now (the second test), so the stall is shown
with what can still produce one: a third-party admission policy that never admits anything.
"""

from __future__ import annotations

import json

from conftest import run_cli

from tickgate.testing import make_dist

WORKLOAD = {"version": 1, "requests": [
    {"id": "a", "prompt_tokens": 90, "max_output_tokens": 50, "priority": 1, "arrival_ms": 0.0},
    {"id": "b", "prompt_tokens": 20, "max_output_tokens": 60, "priority": 0, "arrival_ms": 10.0},
]}

NEVER = """
    from tickgate import hookimpl
    from tickgate.interfaces import AdmissionPolicy

    class Never(AdmissionPolicy):
        name = "never"
        description = "Queues every request and offers none."

        def __init__(self):
            self.queue = []

        @classmethod
        def build(cls, options, ctx):
            return cls()

        def enqueue(self, request, tick):
            self.queue.append(request)

        def candidates(self, tick):
            return iter(())

        def admitted(self, request, tick):
            self.queue.remove(request)

        def __len__(self):
            return len(self.queue)

    @hookimpl
    def register_admission_policies(register):
        register(Never)
"""

STALLING = """version: 1
scheduler:
  name: seed
  options: {page_size: 16, kv_pages: 20, prefill_budget: 128, decode_batch_width: 2, aging_ticks: 8}
admission: {name: never}
kv_allocator: {name: paged}
timing: {fixed_ms: 5.0}
limits: {max_ticks: 200000}
"""

#: chunked prefill off with a step budget below the longest sequence: vLLM 0.33 refuses it
REFUSED = """version: 1
scheduler:
  name: vllm-v1
  options: {block_size: 16, num_gpu_blocks: 10, max_num_seqs: 4, max_num_batched_tokens: 100,
            enable_chunked_prefill: false, enable_prefix_caching: false, policy: priority}
timing: {fixed_ms: 5.0}
"""


def _replay(tmp_path, policy_text, env=None):
    work, policy, out = tmp_path / "w.json", tmp_path / "p.yaml", tmp_path / "r.json"
    work.write_text(json.dumps(WORKLOAD))
    policy.write_text(policy_text)
    return run_cli("replay", "--input", str(work), "--policy", str(policy), "--output", str(out), env=env), out


def test_a_policy_that_never_admits_stops_the_replay(tmp_path):
    env = make_dist(tmp_path / "site", "never-admission", "0.1", "never_admission", NEVER, ep_name="never")
    result, out = _replay(tmp_path, STALLING, env)
    assert result.returncode == 2
    assert "no progress for" in result.stderr and "2 requests queued, 0 active" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_vllm_refuses_chunked_prefill_off_with_a_budget_below_the_model_length(tmp_path):
    result, out = _replay(tmp_path, REFUSED)
    assert result.returncode == 2 and not out.exists()
    line, = result.stderr.strip().splitlines()
    assert "p.yaml:4:" in line and "$.scheduler.options.max_num_batched_tokens" in line
    assert "enable_chunked_prefill false" in line and "max_model_len (unset" in line
    fixed = REFUSED.replace("policy: priority}", "policy: priority, max_model_len: 100}")
    result, out = _replay(tmp_path, fixed)
    assert result.returncode == 0, result.stderr
    assert out.exists()
