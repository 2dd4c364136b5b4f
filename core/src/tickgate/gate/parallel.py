"""Read the two sides of a large gate at the same time, one in a forked child.

Decoding JSON is most of the cost of gating a million pairs and the two files
are independent, so on a machine with two cores the baseline is read in a
child process while the parent reads the candidate. The child hands back the
finished columns (pickled arrays); errors come back as data and are raised
again in the parent unchanged. The result is identical to reading in turn.
Used only for big files (small ones are faster without a process) and only
where ``fork`` exists (the child inherits the loaded plugin registry).
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

from ..errors import error_as_data, error_from_data
from ..forking import _OFF, _ON, ENV, can_fork, cores
from .inputs import read_side
from .observations import Side

#: both files at least this big -> read in parallel
PARALLEL_BYTES = 32 * 1024 * 1024


def _job(path: str, label: str, format: str) -> tuple[str, Any]:
    try:
        return "ok", read_side(path, label, format)
    except Exception as exc:  # errors come back as data, raised again in the parent
        return error_as_data(exc)


def _unwrap(kind: str, value: Any) -> Side:
    if kind == "ok":
        return value  # type: ignore[no-any-return]
    raise error_from_data(kind, value, "reading")


def worth_it(baseline: Path, candidate: Path) -> bool:
    """Both files big, two cores, ``fork``; ``TICKGATE_PARALLEL=0`` turns the
    child off (as it does the replay's and the import's helpers), ``=1`` forces it."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in _OFF or not can_fork():
        return False
    if setting in _ON:
        return True
    if cores() < 2:
        return False
    try:
        return min(baseline.stat().st_size, candidate.stat().st_size) >= PARALLEL_BYTES
    except OSError:
        return False  # the sequential path reports the missing file


def read_pair(baseline: Path, candidate: Path, format: str) -> tuple[Side, Side]:
    """(baseline, candidate) read concurrently; the same Sides as reading in turn."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork")) as pool:
        future = pool.submit(_job, str(baseline), "baseline", format)
        cand_kind, cand = _job(str(candidate), "candidate", format)
        base_kind, base = future.result()
    # report the baseline's problem first, as the sequential path would
    return _unwrap(base_kind, base), _unwrap(cand_kind, cand)
