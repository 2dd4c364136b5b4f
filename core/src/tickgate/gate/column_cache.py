"""Results per column computed once per gate: exact quantiles and NaN checks.

The quantile signals and the segment summaries ask for the same figures
(p95 latency of the whole run and of every segment, on both sides); at a
million pairs each exact quantile is a pass over up to a million values, so
computing each once matters, and segments are answered from the column's
:class:`~tickgate.gate.tail_quantiles.Tail`. Results are keyed by the identity of the
column object, which is sound only while that object lives: a column is
remembered only after :meth:`ColumnMemo.keep` registered it, and the memo
holds a reference to every kept column (the
:class:`~tickgate.gate.comparison.Comparison` keeps its aligned and per-segment
columns for its own lifetime anyway). Columns that were not kept are computed
every time, never cached by an id that could be reused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import compress
from typing import Any

from .stats import select_quantile
from .tail_quantiles import MIN_VALUES, Tail


class ColumnMemo:
    """Quantiles and NaN checks of kept columns, each computed once."""

    def __init__(self) -> None:
        self._kept: dict[int, Any] = {}
        self._quantiles: dict[tuple[int, float], float] = {}
        self._nan: dict[int, bool] = {}
        self._within: dict[int, Any] = {}
        self._tails: dict[tuple[int, float], Tail] = {}

    def keep(self, column: Any, within: Any = None) -> Any:
        """Register ``column`` (held until the memo goes) and return it.
        ``within``: a kept column that ``column`` is a selection of (a column
        without NaN has no NaN in any selection)."""
        self._kept[id(column)] = column
        if within is not None:
            self._within[id(column)] = within
        return column

    def _is_kept(self, values: Any) -> bool:
        return self._kept.get(id(values)) is values

    def quantile(self, values: Sequence[float], q: float) -> float:
        """``select_quantile(values, q)``: exact, remembered for kept columns."""
        key = (id(values), q)
        cached = self._quantiles.get(key)
        if cached is None:
            tail = self._tail(values, q)
            cached = tail.quantile() if tail is not None else None
            if cached is None:
                cached = select_quantile(values, q)
            if self._is_kept(values):
                self._quantiles[key] = cached
        return cached

    def selection_quantile(self, values: Sequence[float], select: bytes, size: int, q: float) -> float:
        """``select_quantile`` of the ``size`` values that the byte mask
        ``select`` marks with 1 (not remembered: the caller keys it by name)."""
        tail = self._tail(values, q)
        result = tail.quantile(select, size) if tail is not None else None
        if result is None:
            result = select_quantile(list(compress(values, select)), q)
        return result

    def _tail(self, values: Sequence[float], q: float) -> Tail | None:
        """The kept, NaN-free, long column's tail for ``q`` (made once)."""
        if len(values) < MIN_VALUES or not self._is_kept(values) or self.has_nan(values):
            return None
        key = (id(values), q)
        tail = self._tails.get(key)
        if tail is None:
            tail = self._tails[key] = Tail(values, q)
        return tail

    def has_nan(self, values: Sequence[float]) -> bool:
        """Whether any value is NaN (absent), remembered for kept columns."""
        cached = self._nan.get(id(values))
        if cached is None and self._is_kept(values):
            whole = self._within.get(id(values))
            if whole is not None and self._nan.get(id(whole)) is False:
                cached = self._nan[id(values)] = False
        if cached is None:
            cached = any(map(math.isnan, values))
            if self._is_kept(values):
                self._nan[id(values)] = cached
        return cached
