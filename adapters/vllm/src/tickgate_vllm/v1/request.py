"""Per-request state of the ``vllm-v1`` mirror and the chained block keys of a prompt.

Mirrors:

- ``vllm/v1/request.py``: ``Request`` (``num_tokens``, ``num_computed_tokens``,
  ``num_output_tokens``, ``num_preemptions``, ``status``) and ``Request.__lt__``,
  the priority queue's order (``vllm/v1/core/sched/request_queue.py``);
- ``vllm/v1/core/single_type_kv_cache_manager.py``: the request's blocks
  (``req_to_blocks``) and ``num_cached_block``;
- ``vllm/v1/core/kv_cache_utils.py``: ``hash_block_tokens`` /
  ``get_request_block_hasher`` (block *i*'s hash chained to block *i-1*'s),
  as :func:`prompt_block_keys`.

:class:`RequestState` keeps ``__slots__`` (its fields are read in every step of
every request); the decode group's fields (``group_clock``, ``group_phase``)
are documented in :mod:`.group`. The step code reads the fields it uses
more than once into short locals (``T`` = ``num_tokens``, ``nc`` =
``num_computed_tokens``, ``bs`` = ``block_size``, ``maxlen`` = ``max_model_len``):
one attribute load per request visited, in the loops the profile is made of.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from itertools import chain
from typing import Any

from tickgate import Request, run_starts

WAITING, RUNNING, PREEMPTED = 0, 1, 2
#: ``RequestStatus.WAITING_FOR_REMOTE_KVS``: holding blocks while its KV loads (v1.offload)
WAITING_FOR_KV = 3
_encode_str = json.encoder.encode_basestring_ascii  # json.dumps of a str (ensure_ascii)


class RequestState:
    """Scheduler state of one request (vLLM's ``Request`` fields that matter)."""

    __slots__ = (
        "admitted_ms",
        "admitted_tick",
        "arrival_ms",
        "arrival_tick",
        "blocks",
        "decode_entry",
        "decode_entry_json",
        "first_hit_tokens",
        "first_token_ms",
        "first_token_tick",
        "group_clock",
        "group_phase",
        "id",
        "id_json",
        "max_tokens",
        "num_blocks",
        "num_cached_blocks",
        "num_cached_logical",
        "num_computed_tokens",
        "num_output_tokens",
        "num_preemptions",
        "num_prompt_keys",
        "num_tokens",
        "ordinal",
        "priority",
        "prompt_keys",
        "request",
        "running_seq",
        "status",
        "transferred",
    )

    def __init__(
        self, r: Request, ordinal: int, prompt_keys: list[Hashable], tick: int, arrival_ms: float | None
    ) -> None:
        self.request = r
        self.ordinal = ordinal  # arrival order (ties in the priority queue, keys of its own blocks)
        self.max_tokens = r.max_output_tokens
        self.priority = r.priority
        self.num_tokens = r.prompt_tokens  # prompt + sampled output
        self.num_computed_tokens = 0
        self.num_output_tokens = 0  # output tokens sampled
        self.num_blocks = 0  # blocks held
        self.blocks: list[int] = []  # block ids (prefix-caching mode)
        self.num_cached_blocks = 0  # leading blocks registered in the prefix cache
        self.status = WAITING
        self.num_preemptions = 0
        self.prompt_keys = prompt_keys  # chained keys of its shareable prompt blocks (prompt_block_keys)
        self.num_prompt_keys = len(prompt_keys)
        self.num_cached_logical = 0  # leading blocks registered as vLLM would have it (see BlockOps._cache)
        self.id = r.id
        self.id_json = _encode_str(r.id) if type(r.id) is str else None  # the id as JSON
        # its sched entry when it decodes one token, and that entry as JSON (for
        # str ids: details are pre-encoded only then); one pair per request, reused
        # by every record it decodes in
        self.decode_entry: list[Any] = [r.id, 1, "running"]
        self.decode_entry_json = f'[{self.id_json},1,"running"]' if self.id_json is not None else ""
        self.admitted_tick: int | None = None
        self.first_token_tick: int | None = None
        self.first_token_ms: float | None = None
        self.first_hit_tokens = 0  # prefix hit at its first admission
        self.arrival_tick = tick
        self.arrival_ms = arrival_ms
        self.admitted_ms: float | None = None  # when the step of its first admission started (timed)
        self.running_seq = 0  # when it joined the running queue (its order there)
        self.group_clock = 0  # decode clock its fields hold at, while in a decode group
        self.group_phase = 0  # decode-clock phase of its block allocations, while in a decode group
        # its prompt KV arrived from a remote prefill (add_transferred) and it has not been
        # admitted yet; cleared at admission, after which it is an ordinary request
        self.transferred = False

    def key(self, i: int) -> Hashable:
        """Chained hash of block ``i``: shared content for known prompt blocks,
        otherwise unique to this request (its outputs never repeat elsewhere)."""
        pk = self.prompt_keys
        return pk[i] if i < len(pk) else (self.ordinal, i)

    def __lt__(self, other: RequestState) -> bool:  # priority queue order, as vLLM's Request.__lt__
        return (self.priority, self.ordinal) < (other.priority, other.ordinal)


def prompt_block_keys(r: Request, block_size: int, prefix_block_size: int | None = None) -> list[Hashable]:
    """Chained keys of the prompt's full blocks that can be shared with others.

    From ``prompt_token_ids`` (content of each block chained to its parent) or
    ``prefix_blocks`` (workload block ids, keyed per run of consecutive ids:
    :func:`_run_keys`); without either, nothing is shareable. Keys are ints
    built from Python hashes of int tuples: deterministic across processes
    (ints are not salted). Only their equality matters: two blocks' keys are
    equal exactly when the token prefixes up to and including those blocks are
    (up to 64-bit collisions).

    Workload block ids may cover more tokens than a KV block (Mooncake: 512):
    each id then stands for ``prefix_block_size // block_size`` consecutive KV
    blocks of that content. Ids covering fewer tokens are grouped
    ``block_size // prefix_block_size`` to a KV block.
    """
    full = r.prompt_tokens // block_size
    keys: list[Hashable] = []
    parent = 0
    if r.prompt_token_ids is not None:
        ids = r.prompt_token_ids
        for i in range(min(full, len(ids) // block_size)):
            parent = hash((parent, ids[i * block_size : (i + 1) * block_size]))
            keys.append(parent)
    elif r.prefix_blocks is not None:
        wbs = prefix_block_size or block_size
        if wbs >= block_size:
            per = wbs // block_size
            ids = r.prefix_blocks[: -(-full // per)]
            try:
                keys = _run_keys(ids, per)
            except TypeError:  # ids that are not ints (a reader plugin's): one hash per id
                for bid in ids:
                    parent = hash((parent, bid))
                    keys.extend(range(parent * per, parent * per + per))
            del keys[full:]
        else:
            per = block_size // wbs
            ids = r.prefix_blocks
            for i in range(min(full, len(ids) // per)):
                parent = hash((parent, ids[i * per : (i + 1) * per]))
                keys.append(parent)
    return keys


def _run_keys(ids: tuple[int, ...], per: int) -> list[Hashable]:
    """Keys of the KV blocks under workload block ids ``ids``, ``per`` KV blocks
    to an id, computed per run of consecutive ids instead of per block.

    A prefix of ids splits into the same maximal runs wherever it appears (a run
    ends where the next id is not one more), so the prefix up to KV block ``j``
    is exactly: the complete runs before ``j``'s run (as ``(first, count)``),
    the first id of ``j``'s run, and ``j``'s offset in that run. A run's base is
    the hash of the complete runs chained with its first id; its blocks' keys
    are ``base, base + 1, ...``: a ``range``, at C level, in machine words. So
    two keys are equal when the token prefixes are, and otherwise only if two
    64-bit bases land within a run's length of each other (about 1 in 10**17
    per pair of runs of 100 blocks), as rare as a collision of per-block
    hashes. A synthetic trace has one run per request, the real Mooncake trace
    8.6 ids (276 KV blocks) per run.
    """
    if not ids:
        return []
    starts = run_starts(ids)
    if len(starts) == 1:  # one run (every request of a synthetic trace): the loop below, once
        base = hash((0, ids[0]))
        return list(range(base, base + len(ids) * per))
    bases = []
    ends = []
    parent = 0
    for start, stop in zip(starts, [*starts[1:], len(ids)]):
        first = ids[start]
        base = hash((parent, first))
        bases.append(base)
        ends.append(base + (stop - start) * per)
        parent = hash((parent, first, stop - start))
    return list(chain.from_iterable(map(range, bases, ends)))
