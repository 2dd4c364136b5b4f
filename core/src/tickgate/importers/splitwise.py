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

from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import InputError
from ..model import Request
from ._common import ArrivalOrder, TraceReader, csv_rows, field, parse_count, parse_seconds

COLUMNS = ("request_id", "request_type", "application_id", "arrival_timestamp", "batch_size", "prompt_size",
           "token_size")


class SplitwiseReader(TraceReader):
    name = "splitwise"
    description = "splitwise-sim trace CSV (request_id, arrival_timestamp s, prompt_size, token_size, ...)."
    id_prefix = "sw"

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        self.start(path, options)
        order = ArrivalOrder(path, "arrival_timestamp")
        seen: dict[str, int] = {}
        rows = requests = 0
        for line, row, col in csv_rows(path, COLUMNS, "splitwise (splitwise-sim trace)"):
            rows += 1
            rid = field(path, row, col["request_id"], "request_id", line)
            if not rid:
                raise InputError(path, "request_id: expected a non-empty id", line=line)
            if rid in seen:
                raise InputError(path, f"request_id {rid!r} already used on line {seen[rid]}", line=line)
            seen[rid] = line
            ts = parse_seconds(path, line, "arrival_timestamp",
                               field(path, row, col["arrival_timestamp"], "arrival_timestamp", line))
            order.check(ts, line)
            batch = parse_count(path, line, "batch_size",
                                field(path, row, col["batch_size"], "batch_size", line))
            if batch != 1:
                raise InputError(path, f"batch_size: only single-sequence requests (1) can be replayed, "
                                 f"found {batch}", line=line)
            prompt = parse_count(path, line, "prompt_size",
                                 field(path, row, col["prompt_size"], "prompt_size", line))
            output = parse_count(path, line, "token_size",
                                 field(path, row, col["token_size"], "token_size", line))
            app = field(path, row, col["application_id"], "application_id", line)
            if prompt == 0 or output == 0:
                self.skipped.add("zero prompt_size" if prompt == 0 else "zero token_size", line)
                self.progress(rows, requests)
                continue
            requests += 1
            self.progress(rows, requests)
            yield Request(id=rid, prompt_tokens=prompt, max_output_tokens=output,
                          arrival_ms=(ts - order.origin) * 1000.0,  # type: ignore[operator]
                          tenant=app or None)
        self.progress(rows, requests)
