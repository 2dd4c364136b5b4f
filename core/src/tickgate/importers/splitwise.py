"""The ``splitwise`` reader: the splitwise-sim request trace CSV.

Columns ``request_id, request_type, application_id, arrival_timestamp,
batch_size, prompt_size, token_size`` (``arrival_timestamp`` in seconds, as
splitwise-sim's ``generate_trace.py`` writes it). ``prompt_size`` is the
prompt, ``token_size`` the output. The trace's own ``request_id`` is kept (it
must be unique) so replay outcomes can be joined back to simulator output;
``application_id`` becomes the ``tenant``. Only single-sequence requests
(``batch_size`` 1) exist in a tickgate workload, so any other batch size is
an error rather than a silent reinterpretation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..interfaces.model import Request
from ._common import ArrivalOrder, CsvRow, CsvTraceReader

COLUMNS = (
    "request_id",
    "request_type",
    "application_id",
    "arrival_timestamp",
    "batch_size",
    "prompt_size",
    "token_size",
)


class SplitwiseReader(CsvTraceReader):
    name = "splitwise"
    description = "splitwise-sim trace CSV (request_id, arrival_timestamp s, prompt_size, token_size, ...)."
    id_prefix = "sw"
    columns = COLUMNS
    time_column = "arrival_timestamp"
    csv_format = "splitwise (splitwise-sim trace)"

    def start(self, path: Path, options: Mapping[str, Any]) -> None:
        super().start(path, options)
        self.seen: dict[str, int] = {}  # request id -> its line

    def request(self, row: CsvRow, order: ArrivalOrder) -> Request | str:
        rid = row.text("request_id")
        if not rid:
            raise row.error("request_id: expected a non-empty id")
        seen = self.seen
        if rid in seen:
            raise row.error(f"request_id {rid!r} already used on line {seen[rid]}")
        seen[rid] = row.line
        ts = row.seconds("arrival_timestamp")
        order.check(ts, row.line)
        batch = row.count("batch_size")
        if batch != 1:
            raise row.error(f"batch_size: only single-sequence requests (1) can be replayed, found {batch}")
        prompt = row.count("prompt_size")
        output = row.count("token_size")
        app = row.text("application_id")
        if prompt == 0 or output == 0:
            return "zero prompt_size" if prompt == 0 else "zero token_size"
        origin = order.origin
        assert origin is not None  # order.check set it
        return Request(
            id=rid,
            prompt_tokens=prompt,
            max_output_tokens=output,
            arrival_ms=(ts - origin) * 1000.0,
            tenant=app or None,
        )
