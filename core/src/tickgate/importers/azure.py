"""The ``azure`` reader: the Azure LLM inference trace CSV (2023 and 2024 releases).

Columns ``TIMESTAMP`` (``2023-11-16 18:17:03.9799600``: local wall time, no
time zone, up to 7 fractional digits), ``ContextTokens`` (prompt) and
``GeneratedTokens`` (output). Timestamps are parsed exactly, as integer
nanoseconds, so ``arrival_ms`` (relative to the first row) does not depend on
float parsing of dates. The trace has no ids, priorities or tenants.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import InputError
from ..model import Request
from ._common import ArrivalOrder, TraceReader, csv_rows, field, parse_count

_TS = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class _Clock:
    """Parses TIMESTAMP values into integer nanoseconds; dates are cached (a trace spans few days)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.days: dict[str, int] = {}

    def ns(self, text: str, line: int) -> int:
        m = _TS.fullmatch(text)
        if m is None:
            raise InputError(self.path, f"TIMESTAMP: expected 'YYYY-MM-DD HH:MM:SS.fffffff', found {text!r}",
                             line=line)
        day_key = text[:10]
        day = self.days.get(day_key)
        if day is None:
            try:
                day = dt.date(int(m[1]), int(m[2]), int(m[3])).toordinal()
            except ValueError as exc:
                raise InputError(self.path, f"TIMESTAMP: {exc} in {text!r}", line=line) from None
            self.days[day_key] = day
        h, mi, s = int(m[4]), int(m[5]), int(m[6])
        if h > 23 or mi > 59 or s > 60:
            raise InputError(self.path, f"TIMESTAMP: no such time of day in {text!r}", line=line)
        frac = m[7] or ""
        return ((day * 86400 + h * 3600 + mi * 60 + s) * 1_000_000_000) + int(frac.ljust(9, "0") or 0)


class AzureReader(TraceReader):
    name = "azure"
    description = "Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens; 2023/2024)."
    id_prefix = "az"

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        self.start(path, options)
        clock = _Clock(path)
        order = ArrivalOrder(path, "TIMESTAMP")
        rows = requests = 0
        for line, row, col in csv_rows(path, COLUMNS, "azure (Azure LLM inference trace)"):
            its, ictx, igen = col["TIMESTAMP"], col["ContextTokens"], col["GeneratedTokens"]
            rows += 1
            text = field(path, row, its, "TIMESTAMP", line)
            ns = clock.ns(text, line)
            order.check(ns, line, text)
            prompt = parse_count(path, line, "ContextTokens", field(path, row, ictx, "ContextTokens", line))
            output = parse_count(path, line, "GeneratedTokens",
                                 field(path, row, igen, "GeneratedTokens", line))
            if prompt == 0 or output == 0:
                self.skipped.add("zero ContextTokens" if prompt == 0 else "zero GeneratedTokens", line)
                self.progress(rows, requests)
                continue
            requests += 1
            self.progress(rows, requests)
            yield Request(id=self.request_id(line), prompt_tokens=prompt, max_output_tokens=output,
                          arrival_ms=(ns - order.origin) / 1e6)  # type: ignore[operator]
        self.progress(rows, requests)
