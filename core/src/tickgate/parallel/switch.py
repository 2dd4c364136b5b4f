"""The one switch and the one threshold: whether a command uses helper processes.

A helper pays for big inputs on a machine where this process may use two
cores, and needs ``fork`` (the child inherits the loaded plugins and the open
stream). ``TICKGATE_PARALLEL=0`` turns every helper off, ``TICKGATE_PARALLEL=1``
forces them (tests use it on small files); results are identical either way.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "TICKGATE_PARALLEL"
#: inputs at least this big get helper processes (replay, import)
MIN_BYTES = 4 * 1024 * 1024
#: the gate's reader child, for a pair of sides each at least this big: it hands
#: the whole side back in one pickled frame after reading it (0.6 s of a 1M-pair
#: gate, docs/gate.md), where the replay's helpers stream as they go. Measured
#: (docs/DEVELOPING.md, "Helper processes"): 25 % saved at 48 MB a side, nothing
#: from 4 to 33 MiB a side, where MIN_BYTES would start it
SIDES_MIN_BYTES = 32 * 1024 * 1024

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what this process may use, not what the machine has
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    # what multiprocessing's "fork" start method needs, without importing it (17 ms)
    return hasattr(os, "fork")


def helpers_wanted(*inputs: Path | None, min_bytes: int | None = None) -> bool:
    """Whether a command reading ``inputs`` should use helper processes: each
    at least ``min_bytes`` big (default :data:`MIN_BYTES`), two cores, ``fork``,
    unless ``TICKGATE_PARALLEL`` says otherwise."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in _OFF or not can_fork():
        return False
    if setting in _ON:
        return True
    if not inputs or None in inputs or cores() < 2:
        return False
    threshold = MIN_BYTES if min_bytes is None else min_bytes
    try:
        return min(path.stat().st_size for path in inputs if path is not None) >= threshold
    except OSError:
        return False  # reading in-process reports it
