"""Exact quantiles of a column and of any selection of it (a segment) from
one pass over the column.

A gate at a million pairs asks for the p95 of each numeric column and of every
segment of it (two models x two accelerators: four more per column and side).
Selecting each from its own values costs a pass over the segment to cut it out
and another to bracket the quantile. Here the column is passed over once: the
values at or above a cut a little below the quantile (the *tail*, ~10% of
them for the p95) are kept in column order with a byte mask of where they were. A
segment's tail is then the part of that tail its own byte mask selects, and
its quantile is read from its sorted tail, exactly, whenever the segment has
no more values below the cut than ranks below its quantile (the count proves
it). When that does not hold (a segment much faster than the rest), the
caller selects from the segment's own values: slower, never different.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress, repeat

from ..util.quantile import quantile

#: columns shorter than this are not worth a tail (selection is as fast)
MIN_VALUES = 20000
#: the cut lies this far (in quantile) below the quantile asked for
MARGIN = 0.05


class Tail:
    """The tail of one NaN-free column for quantile ``q``."""

    def __init__(self, values: Sequence[float], q: float) -> None:
        n = len(values)
        self.n = n
        self.q = q
        probe = sorted(values[:: max(1, n // 4000)])
        cut = quantile(probe, max(0.0, q - MARGIN))
        self.mask = bytes(map(operator.le, repeat(cut), values))
        self.values = list(compress(values, self.mask))

    def quantile(self, select: bytes | None = None, size: int | None = None) -> float | None:
        """The exact q-quantile of the column (``select`` None) or of the
        ``size`` values that the byte mask ``select`` marks with 1; None when
        the tail does not hold the order statistics it needs."""
        if select is None:
            tail, size = self.values, self.n
        else:
            assert size is not None
            tail = list(compress(self.values, compress(select, self.mask)))
        if not size:
            return None
        pos = (size - 1) * self.q
        lo = int(pos)
        below = size - len(tail)
        if below > lo:
            return None
        tail = sorted(tail)  # a copy: self.values stays in column order
        k = lo - below
        a = tail[k]
        b = tail[k + 1] if k + 1 < len(tail) else a
        return a + (b - a) * (pos - lo)
