"""What the CPU KV offload connector of the ``vllm-v1`` mirror keeps per request and per transfer:
``OffloadingConnectorScheduler``'s ``RequestOffloadState`` (:class:`OffloadRequest`) and one load or
store job with the step and time it completes (:class:`Job`), driven by :mod:`.offload`."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

from .cpu_tier import TierRequest

if TYPE_CHECKING:  # pragma: no cover
    from .request import RequestState


class OffloadRequest:
    """``RequestOffloadState`` of one request."""

    __slots__ = (
        "block_keys",
        "ctx",
        "final_blocks",
        "finished",
        "jobs",
        "local",
        "nblocks",
        "next_stored",
        "q",
        "signaled",
        "waited",
    )

    def __init__(self, q: RequestState, block_keys: list[Hashable], tokens_per_chunk: int, bpc: int) -> None:
        self.q = q
        self.block_keys = block_keys  # the chained hash of each prompt block (own keys past the shared ones)
        positions = {
            block_keys[(c + 1) * bpc - 1]: (c + 1) * tokens_per_chunk for c in range(len(block_keys) // bpc)
        }
        self.ctx = TierRequest(positions)
        self.nblocks = 0  # GPU blocks the connector knows of (block_ids)
        self.next_stored = 0  # next_stored_chunk_idx
        self.jobs: set[int] = set()  # transfer_jobs
        self.local = 0  # num_locally_computed_tokens of the last lookup
        self.signaled = False  # finished_signaled
        self.waited = False  # has waited for a load (report)
        self.finished = False
        self.final_blocks: list[int] = []  # its GPU blocks when it finished (what its stores read)


class Job:
    __slots__ = ("blocks", "due", "due_ms", "id", "keys", "req", "store")

    def __init__(
        self, jid: int, req: OffloadRequest, keys: list[Hashable], store: bool, due: int, due_ms: float
    ) -> None:
        self.id = jid
        self.req = req
        self.keys = keys
        self.store = store
        self.due = due
        self.due_ms = due_ms
        self.blocks: list[int] = []  # the GPU blocks a store reads (its fence once the request finished)
