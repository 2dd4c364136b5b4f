"""adapters/sglang/tools/sweep_reference.py: seeded cases, the comparison of a
recorded directory, and (with the reference harness installed) a whole run."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
REF = REPO / "fixtures" / "sglang-reference"
TOOL = REPO / "adapters" / "sglang" / "tools" / "sweep_reference.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sweep_reference", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SWEEP = _tool()
HAS_HARNESS = (SWEEP.DEFAULT_HARNESS / "drive_sglang.py").exists() and SWEEP.DEFAULT_PYTHON.exists()


def _sweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True)


def test_cases_are_seeded_and_named_by_their_workload_seed(tmp_path: Path) -> None:
    def cases(seed: int) -> bytes:
        out = tmp_path / f"c{seed}.json"
        assert _sweep("cases", "--seed", str(seed), "-n", "4", "--out", str(out)).returncode == 0
        return out.read_bytes()

    assert cases(5) == cases(5) != cases(6)
    drawn = json.loads(cases(5))
    assert [c["name"] for c in drawn] == [f"sweep-{5 + i}" for i in range(4)]
    assert [c["gen"][c["gen"].index("--seed") + 1] for c in drawn] == ["5", "6", "7", "8"]


def test_cases_cover_the_knobs_the_issue_lists() -> None:
    drawn = SWEEP.draw_cases(1000, 200)
    cfgs = [c["config"] for c in drawn]
    assert {c["schedule_policy"] for c in cfgs} == {"lpm", "dfs-weight", "fcfs", "lof", "random"}
    assert {c["page_size"] for c in cfgs} == {1, 4, 8, 16, 32}
    assert any(c["chunked_prefill_size"] <= 0 for c in cfgs) and any(c["chunked_prefill_size"] > 0 for c in cfgs)
    assert any(c.get("disable_radix_cache") for c in cfgs) and any(c.get("ignore_eos") for c in cfgs)
    # both at once: SGLang's add_one_req_ignore_eos
    assert any(c.get("ignore_eos") and c.get("disable_radix_cache") for c in cfgs)
    assert any(c["max_total_tokens"] <= 6000 and c.get("init_new_token_ratio", 0.7) < 0.5 for c in cfgs)
    assert all("--priorities" in c["gen"] for c in drawn)
    assert any("--prefix-groups" in c["gen"] for c in drawn) and any("--dup-frac" in c["gen"] for c in drawn)
    assert all(c.get("random_seed") is not None for c in cfgs if c["schedule_policy"] == "random")
    # a context length always leaves room for the longest prompt the workload can draw
    for case in drawn:
        if "context_length" in case["config"]:
            gen = case["gen"]
            longest = int(gen[gen.index("--prompt") + 1].split(",")[1])
            if "--prefix-len" in gen:
                longest += int(gen[gen.index("--prefix-len") + 1].split(",")[1])
            assert case["config"]["context_length"] > longest + 1


def test_compare_passes_a_matching_recording_and_fails_a_changed_step(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    for suffix in (".workload.json", ".steps.jsonl"):
        shutil.copy(REF / f"lpm-prefix{suffix}", rec / f"lpm-prefix{suffix}")
    done = _sweep("compare", str(rec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lpm-prefix: 256/256 identical" in done.stdout
    assert done.stdout.strip().endswith("1 cases, 256 steps, all identical")
    steps = (rec / "lpm-prefix.steps.jsonl").read_text().splitlines()
    line = json.loads(steps[100])
    line["free_tokens"] += 1
    steps[100] = json.dumps(line)
    (rec / "lpm-prefix.steps.jsonl").write_text("\n".join(steps) + "\n")
    done = _sweep("compare", str(rec))
    assert done.returncode == 1
    assert f"DIVERGES: step {line['step']}: free_tokens differs" in done.stdout
    assert done.stdout.strip().endswith("1 cases, 256 steps, 1 diverge")


def test_compare_of_a_directory_without_recordings_is_an_error(tmp_path: Path) -> None:
    done = _sweep("compare", str(tmp_path))
    assert done.returncode == 2 and "no NAME.steps.jsonl recordings" in done.stderr


def test_run_without_the_harness_says_what_is_missing(tmp_path: Path) -> None:
    done = _sweep("run", "--seed", "1", "-n", "1", "--dir", str(tmp_path / "s"), "--harness", str(tmp_path))
    assert done.returncode == 2 and "drive_sglang.py: the harness is not there" in done.stderr


@pytest.mark.skipif(not HAS_HARNESS, reason="the SGLang reference harness is not installed (its install.sh)")
def test_run_records_a_fresh_case_with_sglang_and_the_mirror_matches_it(tmp_path: Path) -> None:
    done = _sweep("run", "--seed", "39100", "-n", "1", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "sweep-39100.summary.json").read_text())
    assert summary["sglang_version"] == "0.5.23"
    assert f"sweep-39100: {summary['totals']['steps']}/{summary['totals']['steps']} identical" in done.stdout
