"""Results per column computed once per gate: exact quantiles and NaN checks.

The quantile signals and the segment summaries ask for the same figures
(p95 latency of the whole run and of every segment, on both sides); at a
million pairs each exact quantile is a pass over up to a million values, so
computing each once matters. Results are keyed by the identity of the column
object, which is sound only while that object lives: a column is remembered
only after :meth:`ColumnMemo.keep` registered it, and the memo holds a
reference to every kept column (the :class:`~tickgate.gate.join.Comparison`
keeps its aligned and per-segment columns for its own lifetime anyway).
Columns that were not kept are computed every time, never cached by an id that
could be reused.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .stats import select_quantile


class ColumnMemo:
    """Quantiles and NaN checks of kept columns, each computed once."""

    def __init__(self) -> None:
        self._kept: dict[int, Any] = {}
        self._quantiles: dict[tuple[int, float], float] = {}
        self._nan: dict[int, bool] = {}
        self._within: dict[int, Any] = {}

    def keep(self, column: Any, within: Any = None) -> Any:
        """Register ``column`` (held until the memo goes) and return it.
        ``within``: a kept column that ``column`` is a selection of (a column
        without NaN has no NaN in any selection)."""
        self._kept[id(column)] = column
        if within is not None:
            self._within[id(column)] = within
        return column

    def quantile(self, values: Sequence[float], q: float) -> float:
        """``select_quantile(values, q)``: exact, remembered for kept columns."""
        key = (id(values), q)
        cached = self._quantiles.get(key)
        if cached is None:
            cached = select_quantile(values, q)
            if self._kept.get(id(values)) is values:
                self._quantiles[key] = cached
        return cached

    def has_nan(self, values: Sequence[float]) -> bool:
        """Whether any value is NaN (absent), remembered for kept columns."""
        cached = self._nan.get(id(values))
        if cached is None and self._kept.get(id(values)) is values:
            whole = self._within.get(id(values))
            if whole is not None and self._nan.get(id(whole)) is False:
                cached = self._nan[id(values)] = False
        if cached is None:
            cached = any(map(math.isnan, values))
            if self._kept.get(id(values)) is values:
                self._nan[id(values)] = cached
        return cached
