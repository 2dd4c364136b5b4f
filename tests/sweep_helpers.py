"""Helpers shared by the sweep and plan tests (not collected): a sweep file beside copies of
the toy vLLM v1 policy (fixtures/policies/vllm-v1-toy.yaml) and the Azure code trace, and reading results.jsonl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import FIXTURES, TOYS

TRACE = FIXTURES / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"
SEQS = "scheduler.options.max_num_seqs"
TOKENS = "scheduler.options.max_num_batched_tokens"
GRID_3X3 = f"  {SEQS}: [16, 64, 128]\n  {TOKENS}: [1024, 2048, 4096]\n"


def write_sweep(folder: Path, grid: str, extra: str = "") -> Path:
    """A sweep file in ``folder`` with the policy and trace copied beside it (relative paths)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TOYS / "vllm-v1-toy.yaml", folder / "base.yaml")
    (folder / "traces").mkdir(exist_ok=True)
    shutil.copy(TRACE, folder / "traces" / "azure.csv")
    path = folder / "sweep.yaml"
    path.write_text("version: 1\n"
                    "policy: base.yaml\n"
                    "workloads:\n"
                    "  - {path: traces/azure.csv, format: azure, limit: 300}\n"
                    f"grid:\n{grid}{extra}", encoding="utf-8")
    return path


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def interrupt_and_resume(tmp_path: Path, options: list[str], env: dict[str, str] | None = None) -> None:
    """Kill a 3 x 3 sweep (SIGKILL: no clean-up of any kind) once its first point is
    written, run it again: only the points without a finished report replay, and
    results.jsonl is the bytes of an uninterrupted ``--jobs 1`` run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tickgate.testing import run_cli

    sweep = write_sweep(tmp_path / "in", GRID_3X3)
    whole = tmp_path / "whole"
    assert run_cli("sweep", str(sweep), "--output", str(whole)).returncode == 0
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tickgate", "sweep", str(sweep), "--output", str(out),
                             *options], env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(6000):  # at most 10 minutes: the first point's hash file, then the kill
            if list(out.glob("points/*/inputs.sha256")) or proc.poll() is not None:
                break
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # the command and its workers
    finally:
        proc.wait()
    finished = sorted(p.parent.name for p in out.glob("points/*/inputs.sha256"))
    assert 1 <= len(finished) < 9, finished  # really interrupted, after a point was written
    before = {name: (out / "points" / name / "report.json").stat().st_mtime_ns for name in finished}
    result = run_cli("sweep", str(sweep), "--output", str(out), *options, env=env)
    assert result.returncode == 0, result.stderr
    assert f"{9 - len(finished)} replayed, {len(finished)} reused, 0 failed" in result.stdout
    for name, mtime in before.items():
        assert (out / "points" / name / "report.json").stat().st_mtime_ns == mtime, name
    assert (out / "results.jsonl").read_bytes() == (whole / "results.jsonl").read_bytes()
