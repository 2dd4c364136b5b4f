"""TensorRT-LLM's KV cache block reuse: the radix tree of blocks and the LRU free queue.

Mirrors ``WindowBlockManager`` in
``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`` and ``LRUEvictionPolicy``
in ``evictionPolicy.cpp`` (``KvCacheConfig.enable_block_reuse``, on by default):

* **The free queue** holds every block no request references, cached content
  or not (``getNumFreeBlocks`` counts them all, so reusable blocks count as
  free for the capacity scheduler). A released block joins the back
  (``releaseBlock``); a new block is taken from the front (``getFreeBlock``),
  and if it held cached content that content, and every block below it in the
  tree, leaves the tree (``freeChildren``): least recently released first.
  Retention priorities and host offload are not mirrored (every block has the
  default priority, ``secondary`` pool empty).
* **Matching** (``loadOrAllocateBlocks``, called from ``addSequence`` when a
  request's first context chunk is scheduled): the prompt's blocks over its
  first ``prompt - 1`` tokens (the last token is always computed) are looked up
  from the root; a full block found is claimed (taken out of the free queue if
  free) and matching goes on below it. A block found with fewer tokens than
  the request's, or more (``enable_partial_reuse``), is reused for the tokens
  both have, and matching stops: if nobody references it and it is a leaf it
  is taken over (``claimLeafBlock``), otherwise its tokens are copied into a
  new block (``copy_on_partial_reuse``; without it such a block is no
  candidate). Blocks not found are new blocks from the front of the free queue.
  The tokens found are the request's ``prepopulatedPromptLen``.
* **Storing** (``storeBlocks``): when a context completes its full prompt
  blocks enter the tree (``storeContextBlocks``), and when a request finishes
  or is paused all its blocks do, up to its last token but one
  (``releaseBlocks`` → ``storeBlocksForReuse``); a block whose key the tree
  already has is not stored twice (the tree's copy stays, the request's copy
  is released as a plain free block). Blocks are then released last first, so
  a request's deepest blocks are evicted before the prefix they hang from.

Blocks of requests whose content the workload does not describe are
anonymous: counted, never in the tree (:mod:`.block_keys`). The free queue
keeps runs of anonymous blocks as one entry, so a request without identity
costs one queue operation per allocation or release, not one per block.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import final

from .block_keys import PromptIdentity, own_key

_NO_UNITS: tuple[Hashable, ...] = ()


class Block:
    """A KV block a request with identity holds or held (``KVCacheBlock``).

    ``lead`` tokens of it are known content (``length`` for a shared block;
    fewer when the rest is the request's own), found again by a partial match
    through its parent's ``partials`` under ``index`` (its first unit, or for
    whole-block units the key of the shared block it starts like)."""

    __slots__ = (
        "children",
        "in_tree",
        "index",
        "key",
        "lead",
        "length",
        "parent",
        "partials",
        "refs",
        "units",
    )

    def __init__(self) -> None:
        self.key: Hashable = None
        self.length = 0
        self.lead = 0
        self.units = _NO_UNITS
        self.index: Hashable = None
        self.parent: Block | None = None
        self.children: dict[Hashable, Block] | None = None
        self.partials: dict[Hashable, list[Block]] | None = None
        self.refs = 1
        self.in_tree = False


@final  # so ``type(entry) is _Run`` failing tells the type checker it is a Block
class _Run:
    """A run of anonymous free blocks in the queue (its count is the queue's value)."""

    __slots__ = ()


class Match:
    """What ``loadOrAllocateBlocks`` found for one request."""

    __slots__ = ("blocks", "from_free", "hit_tokens")

    def __init__(self, blocks: list[Block], hit_tokens: int, from_free: int) -> None:
        self.blocks = blocks
        self.hit_tokens = hit_tokens
        self.from_free = from_free  # blocks that left the free queue (claimed or new)


class BlockReuse:
    """The pool's free queue and the tree of cached blocks; block counts stay the scheduler's."""

    def __init__(
        self, free_blocks: int, tpb: int, *, partial_reuse: bool, copy_on_partial_reuse: bool
    ) -> None:
        self.tpb = tpb
        self.partial_reuse = partial_reuse
        self.copy_on_partial_reuse = copy_on_partial_reuse
        self.root = Block()
        self.root.in_tree = True
        self.root.children = {}
        #: the free queue, front first: Block -> 1, or _Run -> its count of anonymous blocks
        self.free: OrderedDict[Block | _Run, int] = OrderedDict()
        if free_blocks:
            self.free[_Run()] = free_blocks
        # totals for the report
        self.reused_blocks = 0
        self.missed_blocks = 0
        self.reused_tokens = 0
        self.evicted_blocks = 0
        self.stored_blocks = 0

    # -- the free queue --------------------------------------------------------
    def take(self, n: int, blocks: list[Block] | None = None) -> None:
        """Take ``n`` blocks from the front of the free queue (``getFreeBlock``),
        evicting cached content; with ``blocks``, append that many new blocks to it."""
        free = self.free
        while n > 0:
            entry, count = free.popitem(last=False)
            if type(entry) is _Run:
                if count > n:
                    free[entry] = count - n
                    free.move_to_end(entry, last=False)
                    count = n
            elif entry.in_tree:
                if entry.children:
                    self._evict(entry)
                else:  # a leaf, as free blocks nearly always are
                    self._detach(entry)
                    self.evicted_blocks += 1
            n -= count
            if blocks is not None:
                blocks.extend([Block() for _ in range(count)])

    def release_anonymous(self, n: int) -> None:
        """``n`` anonymous blocks join the back of the free queue."""
        if n > 0:
            self.free[_Run()] = n

    def _evict(self, block: Block) -> None:
        """The tree loses ``block`` and everything below it (``freeChildren``); a
        descendant that is free stays in the queue as a plain free block."""
        self._detach(block)
        stack = [block]
        while stack:
            b = stack.pop()
            b.in_tree = False
            b.parent = None
            self.evicted_blocks += 1
            if b.children:
                stack.extend(b.children.values())
            b.children = b.partials = None

    @staticmethod
    def _attach(node: Block, b: Block) -> None:
        b.parent = node
        b.in_tree = True
        if node.children is None:
            node.children = {}
        node.children[b.key] = b
        if b.index is not None:
            if node.partials is None:
                node.partials = {}
            node.partials.setdefault(b.index, []).append(b)

    @staticmethod
    def _detach(b: Block) -> None:
        """``freeLeafBlock``: off its parent's list of next blocks."""
        node = b.parent
        if node is None:
            return
        children, partials = node.children, node.partials
        assert children is not None  # b is one of them
        del children[b.key]
        if b.index is not None:
            assert partials is not None  # b is listed there under its index
            same = partials[b.index]
            same.remove(b)
            if not same:
                del partials[b.index]
        b.parent = None
        b.in_tree = False

    # -- matching (loadOrAllocateBlocks) ---------------------------------------
    def match(self, ident: PromptIdentity | None, seq: int, prompt_len: int) -> Match:
        """Blocks for a prompt of ``prompt_len`` tokens: the tree's where they match, new ones for
        the rest (blocks past the identity have the request's own keys, so a paused request's
        stored blocks are found again)."""
        tpb = self.tpb
        n_blocks = -(-prompt_len // tpb)
        limit = prompt_len - 1  # the last token is never taken from the cache
        node = self.root
        blocks: list[Block] = []
        hit = 0
        from_free = 0
        free = self.free
        j = 0
        while j * tpb < limit:
            length = min(tpb, limit - j * tpb)
            key, units, full_key, _, _ = self._block_id(ident, seq, j, length)
            children = node.children
            found = children.get(key) if children else None  # same key: same tokens, same count
            if found is not None and length == tpb:  # a full block: claim it, go on below it
                if found.refs == 0:
                    del free[found]
                    from_free += 1
                found.refs += 1
                blocks.append(found)
                hit += tpb
                node = found
                j += 1
                continue
            matched = length
            if found is None:
                if not self.partial_reuse:
                    break
                found, matched = self._best_partial(node, units, full_key, length, ident)
                if found is None:
                    break
            # a partial match: take the block over if nobody else can use it, else copy its tokens
            if found.refs == 0 and not found.children:
                del free[found]
                self._detach(found)
                found.refs = 1
                found.key, found.index = None, None
                blocks.append(found)
            else:
                self.take(1, blocks)
            from_free += 1
            hit += matched
            j += 1
            break
        self.reused_blocks += j
        rest = n_blocks - len(blocks)
        self.missed_blocks += rest
        if rest:
            self.take(rest, blocks)
            from_free += rest
        self.reused_tokens += hit
        return Match(blocks, hit, from_free)

    def _candidate(self, block: Block) -> bool:
        """A block that matches only partly may be reused (``findMatchingBlock``)."""
        return self.copy_on_partial_reuse or (block.refs == 0 and not block.children)

    def _best_partial(
        self,
        node: Block,
        units: tuple[Hashable, ...],
        full_key: Hashable,
        length: int,
        ident: PromptIdentity | None,
    ) -> tuple[Block | None, int]:
        """The next block below ``node`` sharing the most leading tokens with ours (the first of
        the best in the order they were stored, as TensorRT-LLM walks ``mNextBlocks``)."""
        best: Block | None = None
        best_n = 0
        if full_key is not None or not units:  # whole-block units: the blocks that start like ours
            if full_key is None:
                return None, 0
            full = node.children.get(full_key) if node.children else None
            cands = ([full] if full is not None else []) + (
                node.partials.get(full_key, []) if node.partials else []
            )
            for c in cands:
                n = min(length, c.lead)
                if n > best_n and self._candidate(c):
                    best, best_n = c, n
            return best, best_n
        if not node.partials:
            return None, 0
        assert ident is not None  # units come from the identity
        ut = ident.unit_tokens
        for c in node.partials.get(units[0], ()):
            if not self._candidate(c):
                continue
            n = 0
            for a, b in zip(c.units, units):
                if a != b:
                    break
                n += 1
            n = min(n * ut, length, c.lead)
            if n > best_n:
                best, best_n = c, n
        return best, best_n

    def _block_id(
        self, ident: PromptIdentity | None, seq: int, j: int, length: int
    ) -> tuple[Hashable, tuple[Hashable, ...], Hashable, int, Hashable]:
        """(key, units, key of the shared full block it starts like, tokens of known content,
        index among its parent's partial candidates) of block ``j`` holding ``length`` tokens.
        A block with fewer than ``tokens_per_block`` tokens has a key that says how many
        (TensorRT-LLM's key is the tokens themselves), so a partial block and the full block it
        starts never share a key."""
        tpb = self.tpb
        if ident is not None and j < len(ident.keys):
            known = ident.covered - j * tpb
            if known > tpb:
                known = tpb
            units = ident.units[j] if ident.units is not None else _NO_UNITS
            if length <= known:
                if length == tpb:
                    return ident.keys[j], units, None, tpb, units[0] if units else None
                if units:  # token ids, or workload ids finer than a block: the leading units
                    units = units[: -(-length // ident.unit_tokens)]
                    return (
                        ("part", ident.keys[j - 1] if j else 0, units, length),
                        units,
                        None,
                        length,
                        units[0],
                    )
                return ("part", ident.keys[j], length), units, ident.keys[j], length, ident.keys[j]
            # known tokens, then the request's own: the known ones can still match partly
            key = own_key(seq, j) if length == tpb else (*own_key(seq, j), length)
            if units:
                return key, units, None, known, units[0]
            return key, units, ident.keys[j], known, ident.keys[j]
        return (own_key(seq, j) if length == tpb else (*own_key(seq, j), length)), _NO_UNITS, None, 0, None

    # -- storing (storeBlocks) -------------------------------------------------
    def store(
        self, blocks: Sequence[Block], ident: PromptIdentity | None, seq: int, tokens: int, *, full_only: bool
    ) -> None:
        """Enter the blocks holding the first ``tokens`` tokens into the tree (``full_only``:
        only the full ones, ``storeContextBlocks``)."""
        tpb = self.tpb
        n = min(tokens // tpb if full_only else -(-tokens // tpb), len(blocks))
        node = self.root
        j = 0
        # the blocks the tree has already (matched, or stored by another request meanwhile)
        while j < n:
            b = blocks[j]
            if b.in_tree:
                node = b
                j += 1
                continue
            key = self._block_id(ident, seq, j, min(tpb, tokens - j * tpb))[0]
            found = node.children.get(key) if node.children else None
            if found is None:
                break
            node = found
            j += 1
        attach = self._attach
        block_id = self._block_id
        self.stored_blocks += max(0, n - j)
        first_new = j
        for j in range(first_new, n):
            b = blocks[j]
            length = min(tpb, tokens - j * tpb)
            b.key, b.units, _, b.lead, b.index = block_id(ident, seq, j, length)
            b.length = length
            attach(node, b)
            node = b

    # -- releasing (releaseBlocks) ---------------------------------------------
    def release(self, blocks: Sequence[Block]) -> int:
        """Drop a request's references, last block first; returns the blocks that became free."""
        freed = 0
        free = self.free
        for b in reversed(blocks):
            b.refs -= 1
            if b.refs == 0:
                free[b] = 1
                freed += 1
        return freed

    # -- the capacity scheduler's look-ahead (findNewContextBlock) -------------
    def first_new_block(self, ident: PromptIdentity | None, seq: int, prompt_len: int) -> Hashable:
        """Key of the prompt's first full block the tree does not hold (None if it holds them all,
        or the prompt has no full block)."""
        tpb = self.tpb
        node = self.root
        keys, covered = (ident.keys, ident.covered) if ident is not None else ((), 0)
        for j in range(prompt_len // tpb):
            key = keys[j] if j < len(keys) and covered >= (j + 1) * tpb else own_key(seq, j)
            found = node.children.get(key) if node.children else None
            if found is None:
                return key
            node = found
        return None

    def summary(self) -> dict[str, int]:
        return {
            "reused_blocks": self.reused_blocks,
            "missed_blocks": self.missed_blocks,
            "reused_tokens": self.reused_tokens,
            "stored_blocks": self.stored_blocks,
            "evicted_blocks": self.evicted_blocks,
        }
