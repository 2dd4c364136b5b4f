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

import csv
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import InputError
from ..model import Request
from ._common import ArrivalOrder, TraceReader, check_header, field, open_text, parse_count, parse_seconds

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
        with open_text(path) as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader, None)
                if header is None:
                    raise InputError(path, "empty file: expected a header " + ",".join(COLUMNS), line=1)
                col = check_header(path, header, COLUMNS, "splitwise (splitwise-sim trace)")
                for row in reader:
                    line = reader.line_num
                    if not row or (len(row) == 1 and not row[0].strip()):
                        continue
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
            except csv.Error as exc:
                raise InputError(path, f"malformed CSV: {exc}", line=reader.line_num) from None
        self.progress(rows, requests)
