"""SGLang's waiting-queue orderings: lpm, dfs-weight, fcfs, lof, random.

Mirrors ``SchedulePolicy.calc_priority`` in SGLang's
``python/sglang/srt/managers/schedule_policy.py``. Like SGLang, each policy
sorts the waiting queue *in place*, so an order persists between steps and
later arrivals are appended behind it. ``lpm`` falls back to FCFS (no sort)
when more than 128 requests wait, as SGLang does to bound its cost.
``random`` shuffles with a ``random.Random`` seeded from the policy options.
"""

from __future__ import annotations

import random
from typing import Callable, Protocol

from .radix_cache import RadixCache, TreeNode

POLICIES = ("lpm", "dfs-weight", "fcfs", "lof", "random")
#: SGLang turns lpm's prefix matching off above this queue length.
LPM_QUEUE_LIMIT = 128


class Waiting(Protocol):
    """What a policy needs to know of a waiting request."""

    max_new_tokens: int
    prefix_tokens: int
    last_node: TreeNode | None


def make_policy(name: str, seed: int) -> Callable[[list, RadixCache, Callable[[Waiting], None]], bool]:
    """Return ``order(queue, tree, match)``; it sorts ``queue`` in place and says
    whether it matched prefixes (``match(req)`` refreshes one request's match)."""
    if name == "fcfs":
        return lambda queue, tree, match: False
    if name == "lof":
        def lof(queue: list, tree: RadixCache, match: Callable[[Waiting], None]) -> bool:
            queue.sort(key=lambda r: -r.max_new_tokens)
            return False
        return lof
    if name == "random":
        rng = random.Random(seed)

        def shuffle(queue: list, tree: RadixCache, match: Callable[[Waiting], None]) -> bool:
            rng.shuffle(queue)
            return False
        return shuffle
    if name == "lpm":
        def lpm(queue: list, tree: RadixCache, match: Callable[[Waiting], None]) -> bool:
            if len(queue) > LPM_QUEUE_LIMIT:
                return False
            for r in queue:
                match(r)
            queue.sort(key=lambda r: -r.prefix_tokens)
            return True
        return lpm
    if name == "dfs-weight":
        def dfs(queue: list, tree: RadixCache, match: Callable[[Waiting], None]) -> bool:
            for r in queue:
                match(r)
            _sort_by_dfs_weight(queue, tree)
            return True
        return dfs
    raise ValueError(f"unknown schedule_policy {name!r}")


def _sort_by_dfs_weight(queue: list, tree: RadixCache) -> None:
    """Group requests by the tree node their prefix ends at; visit the tree
    depth first, heavier subtrees (more waiting requests) first, emitting a
    node's own requests after its children (SGLang's ``_get_dfs_priority``)."""
    by_node: dict[int, list] = {}
    nodes: dict[int, TreeNode] = {}
    for r in queue:
        node = r.last_node if r.last_node is not None else tree.root
        by_node.setdefault(id(node), []).append(r)
        nodes[id(node)] = node
    weight: dict[int, int] = {k: len(v) for k, v in by_node.items()}
    # propagate counts to ancestors
    for key, node in list(nodes.items()):
        count = len(by_node[key])
        parent = node.parent
        while parent is not None:
            weight[id(parent)] = weight.get(id(parent), 0) + count
            parent = parent.parent
    out: list = []
    stack: list[tuple[TreeNode, bool]] = [(tree.root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            out.extend(by_node.get(id(node), ()))
            continue
        stack.append((node, True))
        children = [c for c in node.children.values() if weight.get(id(c), 0) > 0]
        children.sort(key=lambda c: -weight[id(c)])
        for child in reversed(children):
            stack.append((child, False))
    queue[:] = out
