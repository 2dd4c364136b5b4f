"""Run a benchmark command in a fresh process; measure its wall time and peak RSS (Linux /proc).

Shared by the benchmark scripts that time a whole command as a user runs it
(``bench_gate.py``, ``bench_vs_peer.py``). The peak RSS is that of the whole
process tree: the command and every process it forks or starts (tickgate's
replay helpers, aisimulate's resource worker), summed at each sample, every
``interval`` seconds, and never less than the largest single process's own
peak (``ru_maxrss`` from ``os.wait4``). A peak shorter than the interval can
be missed by the sum, so the figure is a lower bound of the tree's true peak.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` plus all its descendants, in KiB (0 where /proc is missing)."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    break
        except (OSError, ValueError):  # the process ended while it was read
            pass
    return total


def run_measured(argv: list[str], *, env: dict[str, str] | None = None,
                 interval: float = 0.02) -> dict[str, Any]:
    """Run ``argv``; return its exit code, output, wall seconds, CPU seconds (the command's own user +
    system time, and its waited-for children's) and peak RSS (MiB, see the module doc)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()  # benchmark timing only
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        peak_kib = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_kib = max(peak_kib, tree_rss_kib(proc.pid))
            time.sleep(interval)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return {"code": proc.returncode, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_mb": max(peak_kib, usage.ru_maxrss) / 1024.0,
                "largest_process_rss_mb": usage.ru_maxrss / 1024.0,
                "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}
