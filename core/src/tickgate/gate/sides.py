"""Read the two sides of a large gate at the same time, the baseline in a forked child.

Decoding JSON is most of the cost of gating a million pairs and the two files
are independent, so on a machine with two cores the baseline is read in a
:class:`~tickgate.parallel.helper.Helper` while the parent reads the
candidate. The child hands back the finished columns (one pickled frame);
its errors are raised again in the parent unchanged, the baseline's first, as
reading in turn reports them. The result is identical to reading in turn.
Used only for big files (:data:`tickgate.parallel.switch.SIDES_MIN_BYTES`:
small ones are faster without a process) and only where ``fork`` exists (the
child inherits the loaded plugin registry).
"""

from __future__ import annotations

from pathlib import Path

from ..parallel import switch
from ..parallel.helper import Helper
from .inputs import read_side
from .observations import Side


def worth_it(baseline: Path, candidate: Path) -> bool:
    """Both files big, two cores, ``fork``; ``TICKGATE_PARALLEL`` as for every helper."""
    return switch.helpers_wanted(baseline, candidate, min_bytes=switch.SIDES_MIN_BYTES)


def read_pair(baseline: Path, candidate: Path, format: str) -> tuple[Side, Side]:
    """(baseline, candidate) read concurrently; the same Sides as reading in turn."""
    with Helper(
        lambda channel: read_side(str(baseline), "baseline", format),
        role=f"reading {baseline}",
        instead="reads it in this process instead",
        doing="reading",
    ) as helper:
        failed: Exception | None = None
        try:
            cand = read_side(str(candidate), "candidate", format)
        except Exception as exc:
            failed = exc
        base: Side = helper.result()  # the baseline's problem first, as the sequential path reports it
    if failed is not None:
        raise failed
    return base, cand
