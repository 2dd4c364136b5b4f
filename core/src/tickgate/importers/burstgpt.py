"""The ``burstgpt`` reader: the BurstGPT trace CSV.

Columns ``Timestamp`` (seconds since 00:00 of the trace's first day),
``Model`` (``ChatGPT`` or ``GPT-4``), ``Request tokens``, ``Response tokens``,
``Total tokens``, ``Log Type`` (``Conversation log`` or ``API log``); the
newer release adds ``Session ID`` and ``Elapsed time``.

Mapping: ``Model`` -> ``lane`` and ``Log Type`` -> ``tenant``, so the replay
report keeps per-model and per-client-kind segments (both have two values).
``Session ID`` and ``Elapsed time`` are not used (a conversation is not a
tenant; the elapsed time is the serving system's answer, not the demand).

Failed requests appear as ``Response tokens == 0``. They cannot be replayed
(a request must ask for at least one token), so they are skipped and counted:
``tickgate import`` prints the count and first line numbers on stderr and
keeps them in the workload header's ``source.skipped``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import InputError
from ..model import Request
from ._common import ArrivalOrder, TraceReader, csv_rows, field, parse_count, parse_seconds

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
FAILED = "failed request (Response tokens == 0)"


class BurstGptReader(TraceReader):
    name = "burstgpt"
    description = "BurstGPT CSV (Timestamp s, Model, Request/Response tokens, Log Type); failed rows reported."
    id_prefix = "bg"

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        self.start(path, options)
        order = ArrivalOrder(path, "Timestamp")
        rows = requests = 0
        for line, row, col in csv_rows(path, COLUMNS, "burstgpt"):
            its, imodel, ireq, iresp, ilog = (col["Timestamp"], col["Model"], col["Request tokens"],
                                              col["Response tokens"], col["Log Type"])
            rows += 1
            ts = parse_seconds(path, line, "Timestamp", field(path, row, its, "Timestamp", line))
            order.check(ts, line)
            prompt = parse_count(path, line, "Request tokens",
                                 field(path, row, ireq, "Request tokens", line))
            output = parse_count(path, line, "Response tokens",
                                 field(path, row, iresp, "Response tokens", line))
            model = field(path, row, imodel, "Model", line)
            log_type = field(path, row, ilog, "Log Type", line)
            if not model or not log_type:
                raise InputError(path, f"{'Model' if not model else 'Log Type'}: expected a "
                                 "non-empty value", line=line)
            if output == 0:
                self.skipped.add(FAILED, line)
                self.progress(rows, requests)
                continue
            if prompt == 0:
                self.skipped.add("zero Request tokens", line)
                self.progress(rows, requests)
                continue
            requests += 1
            self.progress(rows, requests)
            yield Request(id=self.request_id(line), prompt_tokens=prompt, max_output_tokens=output,
                          arrival_ms=(ts - order.origin) * 1000.0,  # type: ignore[operator]
                          tenant=log_type, lane=model)
        self.progress(rows, requests)
