"""The prefix-cache signal reads every kind of replay report (issue 32): vllm-v1, sglang,
trtllm, the seed scheduler (either allocator) and fleets each write their hit rate in
their own place (tickgate.readers.replay_report.prefix_hit_rate); before, only
vllm-v1's was read and the rest were "recorded by neither"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES, run_cli
from tickgate.gate.pipeline import gate_files

SHARED = FIXTURES / "scenarios" / "shared-prefix.json"
#: every policy that replays (the gate policies judge instead)
REPLAYING = sorted(p.name for p in POLICIES.glob("*.yaml") if not p.name.startswith("gate-"))
GATE = "version: 1\ngate:\n  signals:\n    - name: prefix-cache-hit-rate\n      options: {threshold: 0.05}\n"


def _workloads(tmp: Path, timed: bool) -> tuple[Path, Path]:
    """The shared-prefix scenario (3 families of requests sharing 128-token system prompts),
    and the same requests with nothing shared (every prefix block their own)."""
    doc = json.loads(SHARED.read_text())
    if not timed:  # a policy without a timing section replays arrival ticks
        for r in doc["requests"]:
            del r["arrival_ms"]
    shared = tmp / f"shared-{timed}.json"
    shared.write_text(json.dumps(doc))
    for i, r in enumerate(doc["requests"]):
        r["prefix_blocks"] = [100_000 * (i + 1) + j for j in range(len(r["prefix_blocks"]))]
    alone = tmp / f"alone-{timed}.json"
    alone.write_text(json.dumps(doc))
    return shared, alone


def _replay(workload: Path, policy: Path, out: Path) -> dict[str, Any]:
    result = run_cli("replay", "--input", str(workload), "--policy", str(policy), "--output", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("preset", REPLAYING)
def test_the_prefix_cache_signal_reads_every_replay(preset: str, tmp_path: Path) -> None:
    policy = POLICIES / preset
    timed = "\ntiming:" in policy.read_text()
    shared, alone = _workloads(tmp_path, timed)
    base = _replay(shared, policy, tmp_path / "base.json")
    _replay(alone, policy, tmp_path / "cand.json")
    gate = tmp_path / "gate.yaml"
    gate.write_text(GATE)
    signal = gate_files(gate, baseline=tmp_path / "base.json", candidate=tmp_path / "cand.json")["signals"][0]
    assert signal["status"] != "not_evaluated", signal
    assert isinstance(signal["baseline"], float) and isinstance(signal["candidate"], float), signal
    assert signal["candidate"] == 0.0  # nothing shared, nothing served from a cache
    hits = sum(o.get("prefix_hit_tokens", 0) for o in base["outcomes"])
    if hits:  # this policy caches prefixes: sharing nothing is a drop the signal holds on
        assert signal["baseline"] > 0.05
        assert signal["status"] == "hold" and signal["reason"] == "regression", signal
    else:  # the seed scheduler's paged allocator keeps no prefix cache: 0 on both sides
        assert signal["baseline"] == 0.0 and signal["status"] == "pass", signal
