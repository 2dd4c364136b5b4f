"""Prefix-block id lists as runs of consecutive ids.

Traces number prefix blocks as they first appear, so a request's ids are mostly
runs of consecutive integers (a synthetic Mooncake-style trace: one run per
request; the real Mooncake conversation trace: 8.6 ids per run). Block-id lists
are the bulk of a large workload (6.6 million ids for 100k synthetic requests),
and every id costs a decode, an encode and a check each time a file is read or
written, so workload files may spell them as ``[first, count]`` runs
(``prefix_block_runs``) and code that derives per-block values can work per run.

Everything here runs at C speed (slices, ``map``, ``compress``): the per-id cost
is a few C calls, whatever the run lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import add, ne

Runs = list[list[int]]


#: the last tuple asked about and its run starts: a reader that checks a request's
#: ids as runs and the writer that spells them as runs ask about the same tuple
#: one after the other (held here, so its identity cannot be reused)
_last: tuple[object, list[int]] = ((), [])


def run_starts(ids: Sequence[int]) -> list[int]:
    """Indexes in ``ids`` where a run starts (0 first), a run being consecutive
    integers ascending by one. ``ids`` must hold integers and be non-empty.
    The list returned is shared: do not change it."""
    global _last
    if ids is _last[0]:
        return _last[1]
    n = len(ids)
    first = ids[0]
    starts = [0]  # the common case: one run, one C-level comparison
    if (
        ids[n - 1] - first != n - 1
        or (tuple(range(first, first + n)) if type(ids) is tuple else list(range(first, first + n))) != ids
    ):
        starts.extend(compress(range(1, n), map(ne, ids[1:], map(add, ids, repeat(1)))))
    if type(ids) is tuple:
        _last = (ids, starts)
    return starts


def block_runs(ids: Sequence[int]) -> Runs:
    """``ids`` as ``[first id, count]`` runs, in order (empty for no ids)."""
    if not ids:
        return []
    starts = run_starts(ids)
    counts = list(map(int.__sub__, [*starts[1:], len(ids)], starts))
    return list(map(list, zip(map(ids.__getitem__, starts), counts)))


def expand_runs(runs: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The ids ``runs`` stand for (the inverse of :func:`block_runs`)."""
    return tuple(chain.from_iterable(range(first, first + count) for first, count in runs))
