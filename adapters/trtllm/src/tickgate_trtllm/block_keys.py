"""Identity of a request's KV blocks for TensorRT-LLM block reuse.

TensorRT-LLM keys a KV block by the tokens it holds (``BlockKey``: the
block's unique tokens, plus LoRA task and extra ids) and finds it in a radix
tree whose path from the root is the sequence of blocks before it
(``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``: ``buildBlockKeys``,
``KVCacheBlock::findMatchingBlock``; ``BlockKeyHasher::hash`` chains a
block's hash to its parent's). The mirror does not see tokens, only what the
workload says about them:

* ``Request.prompt_token_ids``: the tokens themselves; the unit of
  comparison is one token;
* ``Request.prefix_blocks``: opaque ids of the prompt's blocks of
  ``prefix_block_size`` tokens (the workload's ``block_size``; Mooncake: 512),
  two requests with the same leading ids sharing those tokens. An id covering
  a KV block or more is one unit per KV block (its key says which id and
  where in it); ids finer than a KV block are the units themselves.

A block's key is its parent's key chained with its tuple of units (Python's
hash of int tuples: not salted, so the same in every process; only equality
of keys matters). Block ``j`` of a prompt is shareable while the identity
covers all of it (the first ``covered`` tokens); the block where coverage
ends keeps the units it has, so a prompt that ends in the middle of a known
block can still match that block's leading tokens (partial reuse). Blocks
past the covered tokens (the prompt's unknown rest, the generated tokens)
hold content no other request has: :func:`own_key` gives them keys that are
the request's own, so only the request itself (re-admitted after a pause,
``LlmRequest::pause``) can find them again.

Nothing is computed for a request without identity: its blocks are anonymous
(:mod:`.block_reuse`), as every block is with reuse off.
"""

from __future__ import annotations

from collections.abc import Hashable

from tickgate import Request


class PromptIdentity:
    """What the workload says about a prompt's content, in KV blocks of ``tpb`` tokens.

    ``keys[j]`` is block ``j``'s chained key for ``j < len(keys)``; the identity
    covers the first ``covered`` tokens (all of every block but maybe the last).
    ``units[j]`` (token ids, or workload ids finer than a block; None when a unit
    is a whole block) is what a partial match compares; ``unit_tokens`` is how
    many tokens one unit stands for."""

    __slots__ = ("covered", "keys", "unit_tokens", "units")

    def __init__(
        self, keys: list[Hashable], units: list[tuple[Hashable, ...]] | None, unit_tokens: int, covered: int
    ) -> None:
        self.keys = keys
        self.units = units
        self.unit_tokens = unit_tokens
        self.covered = covered

    def length(self, j: int, tpb: int) -> int:
        """Tokens of block ``j`` the identity covers."""
        return min(tpb, self.covered - j * tpb)


def prompt_identity(r: Request, tpb: int, prefix_block_size: int | None) -> PromptIdentity | None:
    """The identity of ``r``'s prompt blocks, or None when the workload says nothing about it."""
    prompt = r.prompt_tokens
    if r.prompt_token_ids is not None:
        ids = r.prompt_token_ids[:prompt]
        return _chain([tuple(ids[i : i + tpb]) for i in range(0, len(ids), tpb)], 1, len(ids))
    if r.prefix_blocks is None:
        return None
    wbs = prefix_block_size or tpb
    ids = r.prefix_blocks
    covered = min(prompt, len(ids) * wbs)
    if covered <= 0:
        return None
    blocks = -(-covered // tpb)
    if wbs % tpb == 0:
        # a workload id is ``per`` whole KV blocks: the id's base (its chain of ids) times
        # ``per`` plus the block's offset in it, exact in Python's unbounded ints
        per = wbs // tpb
        keys: list[Hashable] = []
        parent = 0
        for bid in ids[: -(-blocks // per)]:
            parent = hash((parent, bid))
            keys.extend(range(parent * per, parent * per + per))
        del keys[blocks:]
        return PromptIdentity(keys, None, tpb, covered)
    if wbs > tpb:  # ids that straddle KV blocks: a block is the ids it overlaps and where it starts
        keys = []
        parent = 0
        for start in range(0, covered, tpb):
            end = min(start + tpb, covered)
            parent = hash((parent, ids[start // wbs : (end - 1) // wbs + 1], start % wbs))
            keys.append(parent)
        return PromptIdentity(keys, None, tpb, covered)
    if tpb % wbs:
        return None  # ids finer than a block that do not divide it: nothing usable per block
    per = tpb // wbs
    used = ids[: -(-covered // wbs)]
    return _chain([tuple(used[i : i + per]) for i in range(0, len(used), per)], wbs, covered)


def _chain(units: list[tuple[Hashable, ...]], unit_tokens: int, covered: int) -> PromptIdentity:
    """Chained keys of ``units`` (one tuple of units per KV block)."""
    keys: list[Hashable] = []
    parent = 0
    for u in units:
        parent = hash((parent, u))
        keys.append(parent)
    return PromptIdentity(keys, units, unit_tokens, covered)


def own_key(seq: int, j: int) -> tuple[int, int]:
    """Key of block ``j`` of the request with arrival number ``seq`` where its
    content is its own (a tuple: never equal to a shared key, an int)."""
    return (seq, j)
