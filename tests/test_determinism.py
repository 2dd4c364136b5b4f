"""Replay reports are byte-identical across PYTHONHASHSEED values, working
directories, key order in the input JSON and replays run concurrently in
separate processes. (Partial suite: the seed default policy on the bundled
workload; the report's ``inputs`` block records the paths as given, so the
key-order case compares reports with that block removed.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, REPO

WORKLOAD = FIXTURES / "workload.json"


def _cmd(inp: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "tickgate", "replay", "--input", str(inp), "--output", str(out), "--quiet"]


def _env(seed: str) -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": seed}


def test_replay_identical_across_hash_seeds_cwd_and_parallel_processes(tmp_path: Path) -> None:
    outs = []
    procs = []
    for i, (seed, cwd) in enumerate([("0", REPO), ("1", tmp_path), ("random", REPO)]):
        out = tmp_path / f"r{i}.json"
        outs.append(out)
        procs.append(subprocess.Popen(_cmd(WORKLOAD, out), cwd=cwd, env=_env(seed),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for p in procs:  # all three run at the same time
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    first = outs[0].read_bytes()
    assert all(o.read_bytes() == first for o in outs[1:])


def test_key_order_in_input_json_does_not_change_the_report(tmp_path: Path) -> None:
    doc = json.loads(WORKLOAD.read_text())

    def reverse(v):
        if isinstance(v, dict):
            return {k: reverse(v[k]) for k in reversed(list(v))}
        if isinstance(v, list):
            return [reverse(x) for x in v]
        return v

    shuffled = tmp_path / "copy" / "workload.json"
    shuffled.parent.mkdir()
    shuffled.write_text(json.dumps(reverse(doc)))
    reports = []
    for inp, out in ((WORKLOAD, tmp_path / "a.json"), (shuffled, tmp_path / "b.json")):
        res = subprocess.run(_cmd(inp, out), capture_output=True, text=True, cwd=REPO, timeout=300)
        assert res.returncode == 0, res.stderr
        report = json.loads(out.read_text())
        report.pop("inputs", None)
        reports.append(report)
    assert reports[0] == reports[1]
    assert reports[0]["summary"]["trace_fingerprint"]
