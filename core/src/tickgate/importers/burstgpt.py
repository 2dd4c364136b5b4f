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

from ..interfaces.model import Request
from ._common import ArrivalOrder, CsvRow, CsvTraceReader

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
FAILED = "failed request (Response tokens == 0)"


class BurstGptReader(CsvTraceReader):
    name = "burstgpt"
    description = (
        "BurstGPT CSV (Timestamp s, Model, Request/Response tokens, Log Type); failed rows reported."
    )
    id_prefix = "bg"
    columns = COLUMNS
    time_column = "Timestamp"
    csv_format = "burstgpt"

    def request(self, row: CsvRow, order: ArrivalOrder) -> Request | str:
        ts = row.seconds("Timestamp")
        order.check(ts, row.line)
        prompt = row.count("Request tokens")
        output = row.count("Response tokens")
        model = row.text("Model")
        log_type = row.text("Log Type")
        if not model or not log_type:
            raise row.error(f"{'Model' if not model else 'Log Type'}: expected a non-empty value")
        if output == 0:
            return FAILED
        if prompt == 0:
            return "zero Request tokens"
        origin = order.origin
        assert origin is not None  # order.check set it
        return Request(
            id=self.request_id(row.line),
            prompt_tokens=prompt,
            max_output_tokens=output,
            arrival_ms=(ts - origin) * 1000.0,
            tenant=log_type,
            lane=model,
        )
