"""TensorRT-LLM's capacity scheduler: which active requests may run this step.

Mirrors ``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp``:

* ``GUARANTEED_NO_EVICT``: requests in generation are always scheduled and
  the blocks they still need *to completion* are set aside; then requests in
  context state are taken in order while their blocks to completion fit in
  what is left, stopping at the first that does not (no skipping). A started
  request is never paused.
* ``STATIC_BATCH``: the same, but new contexts are only taken when nothing is
  in generation (a batch runs to its end before the next one starts).
* ``MAX_UTILIZATION``: requests are taken in order while the blocks they need
  for *the next step only* fit; when one does not fit, the last started
  request at or after it is paused (its blocks freed) and the request is
  tried again; with nothing left to pause the walk stops.

All three stop at ``max_batch_size`` scheduled requests (``maxNumRequests``).

With block reuse, ``skip`` is ``beneficialToSkip`` (:mod:`.prefix_reuse`): a
context not started yet that it names is passed over for this step (before
the request-count and block checks, as in ``GuaranteedNoEvictScheduler::impl``
and ``MaxUtilizationScheduler::operator()``); ``freed_by`` says how many blocks
pausing a request frees (shared blocks stay with the requests still holding
them, ``schedulingRemoveSequence``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

POLICIES = ("GUARANTEED_NO_EVICT", "MAX_UTILIZATION", "STATIC_BATCH")


class Active(Protocol):
    seq: int
    in_generation: bool
    blocks: int

    @property
    def started(self) -> bool: ...

    def blocks_to_completion(self) -> int: ...

    def blocks_next_step(self) -> int: ...


#: the caller's request type: what it passes in is what it gets back
A = TypeVar("A", bound=Active)


def guaranteed_no_evict(
    generating: Sequence[A],
    contexts: Iterable[A],
    free_blocks: int,
    max_requests: int,
    static_batch: bool = False,
    skip: Callable[[A], bool] | None = None,
) -> list[A]:
    """Scheduled requests, generation first then contexts, in list order."""
    scheduled: list[A] = []
    available = free_blocks
    for req in generating:
        if len(scheduled) >= max_requests:
            return scheduled
        scheduled.append(req)
        available -= req.blocks_to_completion()
    if static_batch and scheduled:
        return scheduled
    for req in contexts:
        if skip is not None and skip(req):
            continue
        if len(scheduled) >= max_requests:
            break
        need = req.blocks_to_completion()
        if need > available:
            break
        scheduled.append(req)
        available -= need
    return scheduled


def max_utilization(
    generating: Sequence[A],
    contexts: Sequence[A],
    free_blocks: int,
    max_requests: int,
    skip: Callable[[A], bool] | None = None,
    freed_by: Callable[[A], int] | None = None,
) -> tuple[list[A], list[A]]:
    """(scheduled, paused): the active list is the arrival-ordered merge of both lists."""
    started = sorted((r for r in (*generating, *contexts) if r.started), key=lambda r: r.seq)
    merged = heapq.merge(generating, contexts, key=lambda r: r.seq)
    scheduled: list[A] = []
    paused: list[A] = []
    used = 0
    free = free_blocks
    end = None  # requests at or after this seq were paused: the walk stops there
    req = next(merged, None)
    while req is not None and (end is None or req.seq < end):
        if skip is not None and skip(req):
            req = next(merged, None)
            continue
        need = req.blocks_next_step()
        if len(scheduled) < max_requests and used + need <= free:
            scheduled.append(req)
            used += need
            req = next(merged, None)
            continue
        while started and end is not None and started[-1].seq >= end:
            started.pop()
        if started and started[-1].seq >= req.seq:
            victim = started.pop()
            free += victim.blocks if freed_by is None else freed_by(victim)
            paused.append(victim)
            end = victim.seq
        else:
            break
    return scheduled, paused
