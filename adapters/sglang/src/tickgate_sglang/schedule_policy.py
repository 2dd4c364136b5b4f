"""SGLang's waiting-queue orderings: lpm, dfs-weight, fcfs, lof, random.

Follows sglang 0.5.23, ``python/sglang/srt/managers/schedule_policy.py``,
``SchedulePolicy.calc_priority`` and what it calls:

* ``lpm`` and ``dfs-weight`` (cache-aware) first match every waiting request
  against the radix tree (``_compute_prefix_matches``: the whole prompt plus
  output, no ``- 1`` cap, so the match touches and splits the tree) and, for a
  request whose cached prefix is at most 32 tokens, against a throw-away tree of
  the queue's own prompts (``waiting_queue_radix_tree``): if 32 or more of its
  tokens are already there, another waiting request carries the same prefix and
  this one is *deprioritized* (in-batch prefix caching, so the prefix is computed
  once); otherwise its prompt is added to that tree. ``lpm`` then sorts by
  matched tokens, most first, deprioritized last (stable); with more than 128
  waiting it turns into fcfs for that pass (``_determine_active_policy``).
  The sort key is ``num_matched_prefix_tokens``, not the match itself:
  ``match_kv_cache`` (mem_cache/common.py:261) caps it at
  ``_compute_max_prefix_len`` = ``len(prompt + output) - 1``
  (managers/schedule_batch.py:1766-1785), while ``prefix_len`` (the in-batch
  check's figure, schedule_policy.py:365) is the uncapped match. So a fully
  cached duplicate prompt ranks with a longer request matching one token fewer
  than its length, and the queue's order breaks that tie
  (``_sort_by_longest_prefix``, schedule_policy.py:441-451).
  ``dfs-weight`` orders by ``_dfs_weight_order`` (base_prefix_cache.py).
* ``fcfs`` keeps the queue, ``lof`` sorts by ``max_new_tokens``, most first,
  ``random`` shuffles: SGLang calls ``random.shuffle`` of Python's process-wide
  generator, which ``Scheduler.__init__`` seeds with ``--random-seed``
  (``set_random_seed``) and which nothing else in the scheduler loop draws from,
  so a ``random.Random(random_seed)`` shuffling at the same passes makes the same
  orders (the recorded ``random-prefix`` case checks it).
* The cache-agnostic passes (fcfs, lof, random, and lpm above 128) refresh the
  LRU recency of the first 128 waiting prompts, queue head last, on every 32nd
  pass (``_touch_waiting_prefixes``, ``WAITING_PREFIX_REFRESH_INTERVAL``), so
  eviction spares what waits longest.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from .radix_cache import RadixCache

if TYPE_CHECKING:  # pragma: no cover
    from .scheduler_state import SchedulerState

POLICIES = ("lpm", "dfs-weight", "fcfs", "lof", "random")
CACHE_AWARE = ("lpm", "dfs-weight")
#: WAITING_QUEUE_PREFIX_MATCH_MAX: lpm turns fcfs above this queue length; the refresh touches this many
LPM_QUEUE_LIMIT = 128
#: WAITING_PREFIX_REFRESH_INTERVAL: scheduling passes between two recency refreshes
REFRESH_INTERVAL = 32
#: IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD / _DEPRIORITIZE_THRESHOLD (tokens)
IN_BATCH_CHECK = 32
IN_BATCH_DEPRIORITIZE = 32


class SchedulePolicy:
    """``calc_priority`` for one scheduler (it keeps the refresh counter and the
    random generator across passes)."""

    def __init__(self, name: str, seed: int) -> None:
        if name not in POLICIES:
            raise ValueError(f"unknown schedule_policy {name!r}")
        self.name = name
        self.rng = random.Random(seed)
        self.refresh_calls = 0

    def calc_priority(self, queue: list[Any], sched: SchedulerState) -> None:
        """Order ``queue`` in place (SGLang sorts its waiting queue in place, so an
        order persists and later arrivals queue behind it)."""
        policy = self.name
        if policy == "lpm" and len(queue) > LPM_QUEUE_LIMIT:
            policy = "fcfs"
        if policy in CACHE_AWARE:
            deprioritized = self._compute_prefix_matches(queue, sched)
            if policy == "lpm":
                queue.sort(
                    key=lambda r: float("inf") if id(r) in deprioritized else -num_matched_prefix_tokens(r)
                )
            else:
                _sort_by_dfs_weight(queue, sched.tree)
            return
        if policy == "lof":
            queue.sort(key=lambda r: -r.max_new_tokens)
        elif policy == "random":
            self.rng.shuffle(queue)
        self._touch_waiting_prefixes(queue, sched)

    def _compute_prefix_matches(self, queue: list[Any], sched: SchedulerState) -> set[int]:
        deprioritized: set[int] = set()
        # The throw-away tree is only asked whether 32 or more tokens match: that is
        # whether the first 32 tokens' pages equal those of a key put there before,
        # so a set of those leading pages answers the same (a key shorter than that
        # can neither match 32 tokens nor let another match them).
        in_batch: set[tuple[Any, ...]] = set()
        for r in queue:
            sched.match(r, limit=False)
            if r.prefix_len <= IN_BATCH_CHECK and r.key:
                lead = -(-IN_BATCH_DEPRIORITIZE // r.weight)
                if r.fill_len // r.weight < lead:
                    continue
                head = r.key[:lead]
                if head in in_batch:
                    deprioritized.add(id(r))
                else:
                    in_batch.add(head)
        return deprioritized

    def _touch_waiting_prefixes(self, queue: list[Any], sched: SchedulerState) -> None:
        if not queue or not sched.radix:
            return
        refresh = self.refresh_calls % REFRESH_INTERVAL == 0
        self.refresh_calls += 1
        if not refresh:
            return
        tree = sched.tree
        for r in reversed(queue[:LPM_QUEUE_LIMIT]):
            if r.key:
                tree.match_prefix(r.key, r.weight, r.fill_len // r.weight)  # touch_waiting_prefix


def num_matched_prefix_tokens(r: Any) -> int:
    """``Req.num_matched_prefix_tokens`` after ``match_kv_cache`` (sglang 0.5.23
    mem_cache/common.py:260-261): the match capped at ``len(prompt + output) - 1``
    (``Req._compute_max_prefix_len``, managers/schedule_batch.py:1766-1785; no
    logprobs, no dLLM), the figure ``_sort_by_longest_prefix`` ranks by
    (managers/schedule_policy.py:447)."""
    return min(r.prefix_len, max(r.fill_len - 1, 0))


def _sort_by_dfs_weight(queue: list[Any], tree: RadixCache) -> None:
    """``_dfs_weight_order``: group requests by the node their match ends at;
    visit the tree depth first, heavier subtrees (more waiting requests) first
    (stable among equals, in child order), a node's own requests after its
    children's."""
    by_node: dict[int, list[Any]] = {}
    nodes: dict[int, Any] = {}
    for r in queue:
        node = r.last_node if r.last_node is not None else tree.root
        by_node.setdefault(id(node), []).append(r)
        nodes[id(node)] = node
    weight: dict[int, int] = {k: len(v) for k, v in by_node.items()}
    for key, node in list(nodes.items()):
        count = len(by_node[key])
        parent = node.parent
        while parent is not None:
            weight[id(parent)] = weight.get(id(parent), 0) + count
            parent = parent.parent
    out: list[Any] = []
    stack: list[tuple[Any, bool]] = [(tree.root, False)]
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
