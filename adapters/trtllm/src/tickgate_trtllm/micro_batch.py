"""TensorRT-LLM's micro-batch scheduler: the batch one step actually runs.

Mirrors ``cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp``: the
capacity scheduler's requests are walked in order; a generation request
costs one token, a context request its whole remaining prompt (without
chunking, a context that does not fit in ``max_num_tokens`` ends the walk);
the walk also ends at ``max_batch_size`` requests. With
``enable_chunked_context``, contexts are collected first and, if they do not
all fit in the tokens left after generation, cut into chunks that are
multiples of ``tokens_per_block`` by the chunking policy
(``FIRST_COME_FIRST_SERVED``: each takes what it can in order;
``EQUAL_PROGRESS``: one chunk unit each, round-robin, until full). A
request's last chunk may be shorter than a unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

CHUNKING_POLICIES = ("FIRST_COME_FIRST_SERVED", "EQUAL_PROGRESS")


class Schedulable(Protocol):
    in_generation: bool

    def context_remaining(self) -> int: ...


#: the caller's request type: what it passes in is what it gets back
S = TypeVar("S", bound=Schedulable)


def micro_batch(
    fitting: Sequence[S],
    *,
    max_batch_size: int,
    max_num_tokens: int,
    chunking: str | None,
    chunk_unit: int,
    max_context_length: int | None = None,
) -> tuple[list[tuple[S, int]], list[S]]:
    """Returns ([(context request, chunk tokens)], [generation requests])."""
    contexts: list[tuple[S, int]] = []
    generation: list[S] = []
    to_chunk: list[S] = []
    tokens = 0
    chunked_tokens = 0
    all_fit = True
    count = 0
    for req in fitting:
        if req.in_generation:
            if tokens + 1 > max_num_tokens:
                break
            generation.append(req)
            tokens += 1
        elif chunking is None:
            need = req.context_remaining()
            if tokens + need > max_num_tokens:
                break
            contexts.append((req, need))
            tokens += need
        else:
            need = req.context_remaining()
            if max_context_length is not None and need > max_context_length:
                need = max_context_length
                all_fit = False
            to_chunk.append(req)
            chunked_tokens += need
        count += 1  # noqa: SIM113 -- the requests placed so far (a break leaves it as TRT-LLM does)
        if count >= max_batch_size:
            break
    if chunking is None:
        return contexts, generation
    capacity = max_num_tokens - tokens
    if chunked_tokens > capacity:
        all_fit = False
    if all_fit:
        sizes = [r.context_remaining() for r in to_chunk]
    elif chunking == "EQUAL_PROGRESS":
        sizes = _equal_progress(to_chunk, capacity, chunk_unit, max_context_length)
    else:
        sizes = _first_come_first_served(to_chunk, capacity, chunk_unit, max_context_length)
    contexts.extend((r, s) for r, s in zip(to_chunk, sizes) if s > 0)
    return contexts, generation


def _first_come_first_served(
    reqs: Sequence[Schedulable], capacity: int, unit: int, max_context_length: int | None
) -> list[int]:
    sizes = []
    for req in reqs:
        want = req.context_remaining()
        size = min(want, capacity)
        if max_context_length is not None:
            size = min(size, max_context_length)
        if size != want:
            size = size // unit * unit
        sizes.append(size)
        capacity -= size
    return sizes


def _equal_progress(
    reqs: Sequence[Schedulable], capacity: int, unit: int, max_context_length: int | None
) -> list[int]:
    sizes = [0] * len(reqs)
    total = 0
    progressed = True
    while total < capacity and progressed:
        progressed = False
        for i, req in enumerate(reqs):
            new = min(sizes[i] + unit, req.context_remaining())
            step = new - sizes[i]
            if (
                step == 0
                or total + step > capacity
                or (max_context_length is not None and new > max_context_length)
            ):
                continue
            sizes[i] = new
            total += step
            progressed = True
    return sizes
