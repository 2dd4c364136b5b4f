"""A request inside the ``sglang`` mirror (SGLang's ``Req``, the fields the
scheduler reads), and the radix units of its sequence.

KV content is modelled per page of ``page_size`` tokens: unit ``i`` of a request's
key covers tokens ``[i * page, (i + 1) * page)`` of its prompt-then-output
sequence. A page inside the prompt is its token ids (a tuple), or a workload
prefix-block unit; any other page -- a prompt without ids (the reference harness
draws those tokens at random per request), the part of a prompt after its last
whole prefix block, and every page holding an output token (sampled at random per
request) -- is the request's own negative tag, so it matches only that same
request again (a retracted request finding its own prompt still cached), as
random content would. One tag serves all such pages of a request: the radix tree
only ever compares a unit with the unit at the same position of another key, so
repeating it is as unique as numbering the pages, and ``(tag,) * n`` costs a
pointer per page (no integer objects, no loop). SGLang caches the prompt *and* the output of a finished
request (``release_kv_cache(checkpoint=True)``), so these units occupy and free
the pool exactly as the real tokens do.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from tickgate import Request


class Req:
    """One request: sampling bounds, output so far, KV and tree state."""

    __slots__ = (
        "admitted_ms",
        "admitted_tick",
        "arrival_ms",
        "arrival_tick",
        "clipped",
        "extend_end",
        "finished",
        "first_token_ms",
        "first_token_tick",
        "hit_tokens",
        "key",
        "kv_len",
        "last_node",
        "lock_node",
        "max_new_tokens",
        "out",
        "own",
        "pieces",
        "prefix_len",
        "protected",
        "request",
        "retractions",
        "seq",
        "weight",
    )

    def __init__(
        self,
        request: Request,
        seq: int,
        max_new: int,
        key: tuple[Hashable, ...],
        weight: int,
        tick: int,
        now_ms: float,
    ) -> None:
        self.request = request
        self.seq = seq
        self.max_new_tokens = max_new
        self.key = key
        self.weight = weight
        self.out = 0  # len(output_ids)
        self.kv_len = 0  # kv_committed_len: tokens whose KV is held
        self.prefix_len = 0  # cached prefix the next extend starts from
        self.extend_end = 0  # where this round's extend ends
        self.last_node: Any = None  # tree node the last match ended at
        self.lock_node: Any = None  # the node this request holds a lock on (req.lock)
        self.protected = 0  # cache_protected_len: leading tokens owned by the tree
        self.own = 0  # pool tokens held outside the tree (page-rounded)
        self.retractions = 0
        self.hit_tokens = 0
        self.arrival_tick = tick
        self.arrival_ms = now_ms
        self.admitted_tick: int | None = None
        self.admitted_ms: float | None = None
        self.first_token_tick: int | None = None
        self.first_token_ms: float | None = None
        self.clipped = False
        self.pieces = 0  # prefill steps of the current round (chunks)
        self.finished = False

    @property
    def rid(self) -> str:
        return self.request.id

    @property
    def fill_len(self) -> int:
        """``len(origin_input_ids + output_ids)``: a (re)prefill computes the prompt
        and, after a retraction, the output so far."""
        return self.request.prompt_tokens + self.out


def sequence_key(
    prompt_units: tuple[Hashable, ...], prompt_tokens: int, max_output: int, page: int, tag: int
) -> tuple[Hashable, ...]:
    """The request's units for prompt and output: its cacheable prompt pages, then
    its tag ``-tag`` for every further page up to the end of its longest possible
    sequence."""
    total = -(-(prompt_tokens + max_output) // page)
    rest = total - len(prompt_units)
    if rest <= 0:
        return prompt_units[:total]
    return prompt_units + (-tag,) * rest
