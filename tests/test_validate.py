"""``tickgate validate`` refuses exactly what ``replay`` would refuse about a policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES, run_cli

VLLM_WITH_ADMISSION = """version: 1
scheduler:
  name: vllm-v1
  options: {block_size: 16, num_gpu_blocks: 64, max_num_seqs: 4, max_num_batched_tokens: 256}
admission:
  name: priority-fcfs
"""

LPM_WITHOUT_PREFIX_CACHE = """version: 1
scheduler:
  name: seed
  options: {page_size: 16, kv_pages: 64, prefill_budget: 128, decode_batch_width: 4}
admission:
  name: lpm
kv_allocator:
  name: paged
"""

AIMD_BAD_WINDOW = """version: 1
scheduler:
  name: seed
  options: {page_size: 16, kv_pages: 64, prefill_budget: 128, decode_batch_width: 4}
admission:
  name: aimd
  options: {min_window: 8, initial_window: 2, max_window: 16}
"""


@pytest.mark.parametrize("text, expected", [
    (VLLM_WITH_ADMISSION, "p.yaml:5:1: $.admission: scheduler \"vllm-v1\" orders its own queue"),
    (LPM_WITHOUT_PREFIX_CACHE, "p.yaml:6:3: $.admission.name: admission \"lpm\" orders requests by their "
                               "prefix-cache hits, but the KV allocator \"paged\" has no prefix cache"),
    (AIMD_BAD_WINDOW, "p.yaml:6:3: $.admission.name: admission \"aimd\": need min_window <= initial_window"),
])
def test_validate_and_replay_refuse_the_same_policy_at_the_same_place(tmp_path: Path, text: str,
                                                                       expected: str) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(text)
    validated = run_cli("validate", str(policy))
    replayed = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(policy),
                       "--output", str(tmp_path / "r.json"))
    for res in (validated, replayed):
        assert res.returncode == 2
        assert expected in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "ok" not in validated.stdout
    assert not (tmp_path / "r.json").exists()


def test_every_bundled_policy_validates() -> None:
    res = run_cli("validate", *sorted(str(p) for p in POLICIES.glob("*.yaml")))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count(": ok (") == len(list(POLICIES.glob("*.yaml")))
