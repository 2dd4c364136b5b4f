"""Disaggregated prefill/decode: the hand-off from a prefill replica to a decode replica.

Followed (docs/design/fleets-sources.md §5): vLLM's disaggregated serving with the
NIXL connector and its proxy, and Dynamo's prefill-first flow. The proxy sends a
request to a prefill server with ``max_tokens=1``; the prefill replica computes
the prompt and samples one token (discarded: the client's first token comes from
the decode side); its KV is pulled by a decode replica, whose scheduler admits
the request when blocks for the whole prompt fit and recomputes only the last
prompt token, which samples the first output token; decoding goes on there.

Simplified, and said in docs/fleets.md: the transfer is one request-level event
that starts when the prefill finishes and lasts ``latency_ms + prompt tokens x
kv_bytes_per_token / bandwidth`` (no handshake, no layer-wise overlap, no
contention between transfers); the request is routed to a decode replica when
its KV has arrived, so the decode replica holds no blocks during the transfer
(vLLM allocates them first, then pulls); the prefill replica frees its blocks
at once (vLLM keeps them until the decode side has read them).
"""

from __future__ import annotations

import heapq
from array import array
from typing import Any

import attrs

from ..interfaces.model import Request, RequestOutcome
from ..replay.report import distribution
from .spec import TransferSpec

__all__ = ["Handoff"]


class Handoff:
    """Requests between their prefill and their decode, and the transfers' figures."""

    __slots__ = ("bytes", "ms", "originals", "pending", "prefilled_at", "seq", "transfer")

    def __init__(self, transfer: TransferSpec) -> None:
        self.transfer = transfer
        self.originals: dict[str, Request] = {}  # request id -> the client's request, until it is decoded
        self.prefilled_at: dict[str, RequestOutcome] = {}  # its prefill's outcome (admission, for the client)
        self.pending: list[tuple[float, int, str]] = []  # (transfer end, order, request id)
        self.seq = 0
        self.bytes = 0.0
        self.ms = array("d")

    def prefill_request(self, request: Request) -> Request:
        """What the prefill replica gets: the prompt and one token to sample (``max_tokens=1``)."""
        self.originals[request.id] = request
        return attrs.evolve(request, max_output_tokens=1) if request.max_output_tokens != 1 else request

    def prefilled(self, o: RequestOutcome) -> RequestOutcome | None:
        """A prefill replica's outcome: a completion starts the transfer (None: nothing for the
        client yet); a rejection is the client's outcome, with its own request's figures."""
        if o.status != "completed" or o.finished_ms is None:
            del self.originals[o.id]
            return o
        ms = self.transfer.ms(o.prompt_tokens)
        self.bytes += o.prompt_tokens * self.transfer.kv_bytes_per_token
        self.ms.append(ms)
        self.prefilled_at[o.id] = o
        self.seq += 1
        heapq.heappush(self.pending, (o.finished_ms + ms, self.seq, o.id))
        return None

    def next_ms(self) -> float | None:
        return self.pending[0][0] if self.pending else None

    def arrived(self) -> Request:
        """The next request whose KV has arrived, as the decode replica gets it (arriving now)."""
        at, _, rid = heapq.heappop(self.pending)
        return attrs.evolve(self.originals[rid], arrival_ms=at)

    def decoded(self, o: RequestOutcome) -> RequestOutcome:
        """A decode replica's outcome as the client sees it: from the client's arrival,
        admitted when its prefill was (queue time counts the prefill side's queue)."""
        original = self.originals.pop(o.id)
        prefill = self.prefilled_at.pop(o.id)
        return attrs.evolve(o, arrival_ms=original.arrival_ms, admitted_ms=prefill.admitted_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "count": len(self.ms),
            "bytes": round(self.bytes),
            "ms": distribution(self.ms, 3),
            **self.transfer.to_json(),
        }
