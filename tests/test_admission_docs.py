"""What docs/admission.md and docs/trtllm.md claim, measured by running their own commands.

The commands are taken from the documents' "Try it" blocks (so a document whose commands stop
producing its figures fails here) and run in-process through ``tickgate.commands.cli.main``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tickgate.commands.cli import main

REPO = Path(__file__).resolve().parents[1]
ADMISSION = REPO / "docs" / "admission.md"
TRTLLM = REPO / "docs" / "trtllm.md"


def replay(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["replay", *args, "--output", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    return json.loads(out.read_text())


def _replay_command(doc: str, workload: str, policy_pattern: str) -> list[str]:
    """``--input W --policy P`` of the documented ``tickgate replay`` line for W and P."""
    for line in doc.splitlines():
        m = re.search(r"tickgate replay --input (\S+) --policy (\S+) --output", line)
        if m and m.group(1) == workload and re.fullmatch(policy_pattern, m.group(2)):
            return ["--input", str(REPO / m.group(1)), "--policy", str(REPO / m.group(2))]
    raise AssertionError(f"no documented replay of {workload} with a policy matching {policy_pattern}")


def test_lpm_hit_rates_in_admission_md_come_from_its_commands(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    doc = ADMISSION.read_text(encoding="utf-8")
    base_cmd = _replay_command(doc, "fixtures/admission/lpm.json", r"policies/lpm-baseline\.yaml")
    lpm_cmd = _replay_command(doc, "fixtures/admission/lpm.json", r"policies/lpm\.yaml")
    base = replay(base_cmd, tmp_path / "base.json", capsys)
    lpm = replay(lpm_cmd, tmp_path / "lpm.json", capsys)
    # the baseline differs from lpm only in its admission policy: same scheduler, same allocator
    assert base["plugins"]["kv_allocator"] == lpm["plugins"]["kv_allocator"]
    assert base["plugins"]["kv_allocator"]["name"] == "prefix-cache"
    assert base["plugins"]["admission"]["name"] == "priority-fcfs" and lpm["plugins"]["admission"]["name"] == "lpm"
    b, l = base["scheduler"]["kv_cache"], lpm["scheduler"]["kv_cache"]
    claim = re.search(r"prefix hit rate\s+\(`scheduler\.kv_cache\.prefix_hit_rate`\)\s+(\d+\.\d+)\s+\(priority-fcfs"
                      r"[^)]*\)\s+→\s+(\d+\.\d+)\s+\(lpm\), with (\d+) → (\d+) evicted pages", doc)
    assert claim is not None, "the lpm claim moved or changed wording"
    assert f"{b['prefix_hit_rate']:.1f}" == claim.group(1) == "0.0"
    assert f"{l['prefix_hit_rate']:.2f}" == claim.group(2) == "0.69"
    assert (b["evicted_pages"], l["evicted_pages"]) == (int(claim.group(3)), int(claim.group(4)))


def test_admission_md_baselines_of_the_other_policies_are_the_default_policy() -> None:
    doc = ADMISSION.read_text(encoding="utf-8")
    assert "for p in lanes deadline fair-share aimd; do" in doc
    assert "--policy policies/default.yaml --output /tmp/$p.base.json" in doc


TABLE_ROW = re.compile(r"^\| (GUARANTEED_NO_EVICT|MAX_UTILIZATION|STATIC_BATCH) \| (\d+) \| (\d+) \| (\d+) \((\d+)\) "
                       r"\| (\d+) \| (\d+) ms \| (\d+) ms \| `([0-9a-f]{16})` \|$", re.M)


def test_trtllm_md_capacity_policies_differ_as_documented(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    doc = TRTLLM.read_text(encoding="utf-8")
    loop = re.search(r"for p in ([a-z -]+); do\n\s+tickgate replay --input (\S+) --policy "
                     r"fixtures/policies/trtllm-toy-\$p\.yaml", doc)
    assert loop is not None, "the documented capacity-policy loop moved or changed"
    workload = REPO / loop.group(2)
    rows = {m.group(1): m.groups()[1:] for m in TABLE_ROW.finditer(doc)}
    assert set(rows) == {"GUARANTEED_NO_EVICT", "MAX_UTILIZATION", "STATIC_BATCH"}
    measured = {}
    for preset in loop.group(1).split():
        rep = replay(["--input", str(workload), "--policy", str(REPO / "fixtures" / "policies" / f"trtllm-toy-{preset}.yaml")],
                     tmp_path / f"{preset}.json", capsys)
        s, lat = rep["scheduler"], rep["latency"]
        assert rep["summary"]["completed_requests"] == rep["summary"]["request_count"]
        measured[s["capacity_scheduler_policy"]] = (
            str(rep["summary"]["total_ticks"]), str(rep["summary"]["peak_kv_pages"]), str(s["pauses"]),
            str(s["paused_requests"]), str(rep["pressure"]["active"]["peak"]), str(round(lat["ttft_ms"]["p50"])),
            str(round(lat["e2e_ms"]["p50"])), rep["summary"]["trace_fingerprint"])
    assert measured == rows
    # the point of the example: the three capacity policies give three different outcomes
    assert len({m[-1] for m in measured.values()}) == 3
    assert measured["MAX_UTILIZATION"][2] != "0" and measured["GUARANTEED_NO_EVICT"][2] == "0"
    assert measured["MAX_UTILIZATION"][1] == "512"  # the pool is full: there is pressure
