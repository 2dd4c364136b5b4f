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
from typing import Hashable, Sequence

from .block_keys import PromptIdentity, own_key


class Block:
    """A KV block a request with identity holds or held (``KVCacheBlock``)."""

    __slots__ = ("key", "length", "units", "lead", "parent", "children", "by_unit", "refs", "in_tree")

    def __init__(self) -> None:
        self.key: Hashable = None
        self.length = 0  # tokens of content (tpb when full)
        self.units: tuple[Hashable, ...] = ()  # what the workload says its leading tokens are
        self.lead = 0  # how many tokens ``units`` describe (``length`` unless its rest is its own)
        self.parent: Block | None = None
        self.children: dict[Hashable, Block] = {}
        #: children by their first unit: the candidates for a partial match, without walking
        #: every child (the root has one per distinct first block)
        self.by_unit: dict[Hashable, list[Block]] = {}
        self.refs = 0
        self.in_tree = False


class _Run:
    """A run of anonymous free blocks in the queue (its count is the queue's value)."""

    __slots__ = ()


class Match:
    """What ``loadOrAllocateBlocks`` found for one request."""

    __slots__ = ("blocks", "hit_tokens", "from_free", "reused", "partial")

    def __init__(self, blocks: list[Block], hit_tokens: int, from_free: int, reused: int, partial: bool) -> None:
        self.blocks = blocks
        self.hit_tokens = hit_tokens
        self.from_free = from_free  # blocks that left the free queue (claimed or new)
        self.reused = reused  # blocks found in the tree
        self.partial = partial


class BlockReuse:
    """The pool's free queue and the tree of cached blocks; block counts stay the scheduler's."""

    def __init__(self, total_blocks: int, tpb: int, *, partial_reuse: bool, copy_on_partial_reuse: bool) -> None:
        self.tpb = tpb
        self.partial_reuse = partial_reuse
        self.copy_on_partial_reuse = copy_on_partial_reuse
        self.root = Block()
        self.root.in_tree = True
        #: the free queue, front first: Block -> 1, or _Run -> its count of anonymous blocks
        self.free: OrderedDict[object, int] = OrderedDict()
        self.free[_Run()] = total_blocks
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
            else:
                if entry.in_tree:  # type: ignore[attr-defined]
                    self._evict(entry)  # type: ignore[arg-type]
                count = 1
            n -= count
            if blocks is not None:
                for _ in range(count):
                    b = Block()
                    b.refs = 1
                    blocks.append(b)

    def release_anonymous(self, n: int) -> None:
        """``n`` anonymous blocks join the back of the free queue."""
        if n > 0:
            self.free[_Run()] = n

    def _evict(self, block: Block) -> None:
        """The tree loses ``block`` and everything below it (``freeChildren``); a
        descendant that is free stays in the queue as a plain free block."""
        stack = [block]
        self._detach(block)
        while stack:
            b = stack.pop()
            b.in_tree = False
            b.parent = None
            self.evicted_blocks += 1
            stack.extend(b.children.values())
            b.children = {}
            b.by_unit = {}

    # -- matching (loadOrAllocateBlocks) ---------------------------------------
    def match(self, ident: PromptIdentity | None, seq: int, prompt_len: int, *, generated_keys: bool) -> Match:
        """Blocks for a prompt of ``prompt_len`` tokens: the tree's where they match, new ones for
        the rest. ``generated_keys``: blocks past the identity have the request's own keys (a
        paused request's stored blocks can be found again)."""
        tpb = self.tpb
        n_blocks = -(-prompt_len // tpb)
        limit = prompt_len - 1  # the last token is never taken from the cache
        node = self.root
        blocks: list[Block] = []
        hit = 0
        from_free = 0
        partial = False
        j = 0
        while j < n_blocks and j * tpb < limit:
            length = min(tpb, limit - j * tpb)
            key, units, unit_tokens, full_key, _ = self._block_id(ident, seq, j, length, generated_keys)
            if key is None:
                break
            found = node.children.get(key)  # same key: same tokens, same count
            exact = found is not None
            matched = length if exact else 0
            if not exact and self.partial_reuse:
                if full_key is not None:  # a known block the prompt ends in: its leading tokens
                    found = node.children.get(full_key)
                    if found is not None and self._candidate(found):
                        matched = length
                    else:
                        found = None
                if found is None and units:
                    found, matched = self._best_partial(node, units, unit_tokens, length)
            if found is None or matched == 0:
                break
            if exact and length == tpb:
                if found.refs == 0:
                    self.free.pop(found)
                    from_free += 1
                found.refs += 1
                blocks.append(found)
                hit += tpb
                node = found
                self.reused_blocks += 1
                j += 1
                continue
            # a partial match: take the block over if nobody else can use it, else copy its tokens
            partial = True
            if found.refs == 0 and not found.children:
                self.free.pop(found)
                self._evict_quiet(found)
                found.refs = 1
                blocks.append(found)
                from_free += 1
            else:
                self.take(1, blocks)
                from_free += 1
            hit += matched
            self.reused_blocks += 1
            j += 1
            break
        reused = len(blocks)
        rest = n_blocks - reused
        self.missed_blocks += rest
        if rest:
            self.take(rest, blocks)
            from_free += rest
        self.reused_tokens += hit
        return Match(blocks, hit, from_free, reused, partial)

    def _candidate(self, block: Block) -> bool:
        """A block that matches only partly may be reused (``findMatchingBlock``)."""
        return self.partial_reuse and (self.copy_on_partial_reuse or (block.refs == 0 and not block.children))

    def _best_partial(self, node: Block, units: tuple[Hashable, ...], unit_tokens: int,
                      length: int) -> tuple[Block | None, int]:
        """The child of ``node`` sharing the most leading tokens with ``units`` (first best in
        the tree's insertion order, as TensorRT-LLM walks ``mNextBlocks``)."""
        best: Block | None = None
        best_n = 0
        whole = unit_tokens == self.tpb  # one unit for the block: it stands for all the tokens it has
        for child in node.by_unit.get(units[0], ()):
            if not self._candidate(child):
                continue
            n = 0
            for a, b in zip(child.units, units):
                if a != b:
                    break
                n += 1
            n = min(self.tpb if whole and n else n * unit_tokens, length, child.lead)
            if n > best_n:
                best, best_n = child, n
        return best, best_n

    def _evict_quiet(self, block: Block) -> None:
        """``claimLeafBlock`` of a leaf: out of the tree without counting an eviction."""
        self._detach(block)
        block.parent = None
        block.in_tree = False

    @staticmethod
    def _attach(node: Block, b: Block) -> None:
        b.parent = node
        b.in_tree = True
        node.children[b.key] = b
        if b.units:
            node.by_unit.setdefault(b.units[0], []).append(b)

    @staticmethod
    def _detach(b: Block) -> None:
        """``freeLeafBlock``: off its parent's list of next blocks."""
        node = b.parent
        if node is None:
            return
        del node.children[b.key]
        if b.units:
            same = node.by_unit[b.units[0]]
            same.remove(b)
            if not same:
                del node.by_unit[b.units[0]]

    def _block_id(self, ident: PromptIdentity | None, seq: int, j: int, length: int, generated_keys: bool
                  ) -> tuple[Hashable, tuple[Hashable, ...], int, Hashable, int]:
        """(key, units, tokens per unit, key of the full block it is the start of, tokens the
        units describe) of block ``j`` holding ``length`` tokens. A block with fewer than
        ``tokens_per_block`` tokens has a key that says how many (TensorRT-LLM's key is the
        tokens themselves), so a partial block and the full block it starts never share a key."""
        tpb = self.tpb
        known = ident is not None and j < len(ident.keys)
        if known and length <= ident.lengths[j]:  # type: ignore[union-attr]
            units = ident.units[j]  # type: ignore[union-attr]
            ut = ident.unit_tokens  # type: ignore[union-attr]
            if length == tpb:
                return ident.keys[j], units, ut, None, length  # type: ignore[union-attr]
            if ut < tpb:  # token ids, or workload ids finer than a block: the leading units
                units = units[:-(-length // ut)]
                return ("part", ident.keys[j - 1] if j else 0, units, length), units, ut, None, length  # type: ignore
            return ("part", ident.keys[j], length), units, ut, ident.keys[j], length  # type: ignore[union-attr]
        if generated_keys:
            key = own_key(seq, j) if length == tpb else (*own_key(seq, j), length)
            if known:  # starts with known tokens, then the request's own: those can still match partly
                return key, ident.units[j], ident.unit_tokens, None, ident.lengths[j]  # type: ignore[union-attr]
            return key, (), tpb, None, 0
        return None, (), tpb, None, 0

    # -- storing (storeBlocks) -------------------------------------------------
    def store(self, blocks: Sequence[Block], ident: PromptIdentity | None, seq: int, tokens: int,
              *, full_only: bool) -> None:
        """Enter the blocks holding the first ``tokens`` tokens into the tree (``full_only``:
        only the full ones, ``storeContextBlocks``)."""
        tpb = self.tpb
        n = tokens // tpb if full_only else -(-tokens // tpb)
        node = self.root
        need_match = True
        for j in range(min(n, len(blocks))):
            length = min(tpb, tokens - j * tpb)
            key, units, _, _, lead = self._block_id(ident, seq, j, length, True)
            b = blocks[j]
            if need_match:
                found = node.children.get(key)
                if found is not None:
                    node = found
                    continue
                need_match = False
            if b.in_tree:  # pragma: no cover - a request's blocks past its matched prefix are its own
                node = b
                continue
            b.key, b.length, b.units, b.lead = key, length, units, lead
            self._attach(node, b)
            node = b
            self.stored_blocks += 1

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
        for j in range(prompt_len // tpb):
            key = self._block_id(ident, seq, j, tpb, True)[0]
            found = node.children.get(key)
            if found is None:
                return key
            node = found
        return None

    def summary(self) -> dict[str, int]:
        return {"reused_blocks": self.reused_blocks, "missed_blocks": self.missed_blocks,
                "reused_tokens": self.reused_tokens, "stored_blocks": self.stored_blocks,
                "evicted_blocks": self.evicted_blocks}
