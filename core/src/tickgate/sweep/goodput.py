"""Goodput: the share of a replay's requests that meet every per-request SLO.

A replay sink (``replay(..., extra_sinks=[...])``), so it sees every request's
outcome, not the report's first ``--detail-limit``: a request counts when it
completed and its TTFT, TPOT and end-to-end latency (as the report defines
them, docs/report.md "Latency": the timing model's ``frontend_ms`` added to TTFT
and end-to-end) are within the limits given. A rejected request never counts;
the denominator is every request of the workload. Inter-token gaps are not per
request in the outcomes, so an ITL SLO is checked on the whole replay only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class GoodputSink:
    def __init__(self, limits: Mapping[str, float], frontend_ms: float = 0.0) -> None:
        """``limits``: ms by metric, ``ttft``, ``tpot``, ``e2e`` (any of them)."""
        self.ttft = limits.get("ttft")
        self.tpot = limits.get("tpot")
        self.e2e = limits.get("e2e")
        self.frontend_ms = frontend_ms
        self.requests = 0
        self.good = 0

    def arrival(self, request: Any) -> None:
        self.requests += 1

    def record(self, record: Any) -> None:
        pass

    def outcome(self, o: Any) -> None:
        if o.status != "completed" or None in (o.arrival_ms, o.first_token_ms, o.finished_ms):
            return
        c = self.frontend_ms
        if self.ttft is not None and o.first_token_ms - o.arrival_ms + c > self.ttft:
            return
        if self.e2e is not None and o.finished_ms - o.arrival_ms + c > self.e2e:
            return
        if (
            self.tpot is not None
            and o.output_tokens > 1
            and (o.finished_ms - o.first_token_ms) / (o.output_tokens - 1) > self.tpot
        ):
            return
        self.good += 1

    def counts(self) -> dict[str, int]:
        return {"good": self.good, "requests": self.requests}
