"""The ``azure`` reader: the Azure LLM inference trace CSV (2023 and 2024 releases).

Columns ``TIMESTAMP`` (``2023-11-16 18:17:03.9799600``: local wall time, no
time zone, up to 7 fractional digits), ``ContextTokens`` (prompt) and
``GeneratedTokens`` (output). Timestamps are parsed exactly, as integer
nanoseconds, so ``arrival_ms`` (relative to the first row) does not depend on
float parsing of dates. The trace has no ids, priorities or tenants.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from pathlib import Path

from ..interfaces.model import Request
from ..util.errors import InputError
from ._common import ArrivalOrder, CsvRow, CsvTraceReader

_TS = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@functools.lru_cache(maxsize=4096)
def _day(date: str) -> int:
    """``YYYY-MM-DD`` as a day number, cached (a trace spans few days); ValueError
    for a date that does not exist."""
    return dt.date(int(date[:4]), int(date[5:7]), int(date[8:10])).toordinal()


def _ns(path: Path, text: str, line: int) -> int:
    """A TIMESTAMP value as integer nanoseconds."""
    m = _TS.fullmatch(text)
    if m is None:
        raise InputError(
            path, f"TIMESTAMP: expected 'YYYY-MM-DD HH:MM:SS.fffffff', found {text!r}", line=line
        )
    try:
        day = _day(text[:10])
    except ValueError as exc:
        raise InputError(path, f"TIMESTAMP: {exc} in {text!r}", line=line) from None
    h, mi, s = int(m[4]), int(m[5]), int(m[6])
    if h > 23 or mi > 59 or s > 60:
        raise InputError(path, f"TIMESTAMP: no such time of day in {text!r}", line=line)
    frac = m[7] or ""
    return ((day * 86400 + h * 3600 + mi * 60 + s) * 1_000_000_000) + int(frac.ljust(9, "0") or 0)


class AzureReader(CsvTraceReader):
    name = "azure"
    description = "Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens; 2023/2024)."
    id_prefix = "az"
    columns = COLUMNS
    time_column = "TIMESTAMP"
    csv_format = "azure (Azure LLM inference trace)"

    def request(self, row: CsvRow, order: ArrivalOrder) -> Request | str:
        text = row.text("TIMESTAMP")
        ns = _ns(row.path, text, row.line)
        order.check(ns, row.line, text)
        prompt = row.count("ContextTokens")
        output = row.count("GeneratedTokens")
        if prompt == 0 or output == 0:
            return "zero ContextTokens" if prompt == 0 else "zero GeneratedTokens"
        origin = order.origin
        assert origin is not None  # order.check set it
        return Request(
            id=self.request_id(row.line),
            prompt_tokens=prompt,
            max_output_tokens=output,
            arrival_ms=(ns - origin) / 1e6,
        )
