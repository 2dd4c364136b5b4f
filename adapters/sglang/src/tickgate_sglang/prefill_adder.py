"""SGLang's ``PrefillAdder``: which waiting requests one prefill batch takes, and
how many tokens each computes.

Follows sglang 0.5.23, ``python/sglang/srt/managers/schedule_policy.py``
(``PrefillAdder.__init__``, ``budget_state``, ``_update_prefill_budget``,
``add_chunked_req``, ``add_one_req``, ``_select_prefill_admission``,
``_commit_prefill_admission``, ``_get_running_request_total_token_offset``) and
the token pool's budget, ``python/sglang/srt/mem_cache/prefill_budget.py``
(``PrefillBudget``: ``remaining_total`` / ``remaining_current``, ``check_prefill``,
``available_chunk_tokens``, ``reserve``), for a plain token pool (no SWA, Mamba,
HiCache, LoRA, DLLM, KV sharding, priority preemption: the adder's branches for
those are not mirrored).

The budget in words: ``remaining_total`` is the pool's free plus evictable tokens
minus what the batch has reserved (each admitted request: its page-rounded extend,
one page of allocation overhead -- ``per_req_token_overhead`` -- and its remaining
output, clipped at 4096) minus the running requests' expected remaining output
(``new_token_ratio`` times their remaining ``max_new_tokens``, or all of it for an
``ignore_eos`` request). A request is taken while its extend plus remaining output
plus one page is strictly less than ``remaining_total``.

With ``ignore_eos`` and the radix cache disabled SGLang admits through
``add_one_req_ignore_eos`` instead (schedule_policy.py:1241-1383, chosen at
:1401-1402): :meth:`PrefillAdder.add_one_ignore_eos`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .scheduler_state import SchedulerState

#: SGLang's AddReqResult
CONTINUE, NO_TOKEN, OTHER = "continue", "no_token", "other"


class PrefillAdder:
    """One prefill pass's budgets (``PrefillAdder`` + ``PrefillBudget``)."""

    __slots__ = (
        "can_run",
        "clip",
        "current_offset",
        "new_chunked",
        "page",
        "rem_chunk",
        "rem_input",
        "req_states",
        "running",
        "sched",
        "total_offset",
    )

    def __init__(self, sched: SchedulerState, running: list[Any]) -> None:
        self.sched = sched
        self.page = sched.page
        self.clip = sched.clip
        ratio = sched.ratio
        clip = self.clip
        offset = 0.0
        full = sched.ignore_eos
        for r in running:
            # _get_running_request_total_token_offset: 1.0 for ignore_eos (fixed length)
            offset += min(r.max_new_tokens - r.out, clip) * (1.0 if full else ratio)
        self.total_offset: float = offset
        self.current_offset = 0
        self.rem_input = sched.max_prefill
        self.rem_chunk: int | None = sched.chunk_size
        self.can_run: list[Any] = []
        self.new_chunked: Any = None
        self.running = running
        #: add_one_req_ignore_eos's (tokens_left, tokens_occupied), sorted; built on its first call
        self.req_states: list[tuple[float, int]] | None = None

    # -- PrefillBudget ---------------------------------------------------------
    def _free_and_evictable(self) -> int:
        sched = self.sched
        return sched.available + sched.tree.evictable_size

    @property
    def rem_total(self) -> float:
        return self._free_and_evictable() - self.total_offset

    def budget_state(self) -> str:
        free = self._free_and_evictable()
        if not (free - self.total_offset > 0 and free - self.current_offset > 0):
            return NO_TOKEN
        if self.rem_input <= 0:
            return OTHER
        if self.rem_chunk is not None and self.rem_chunk <= 0:
            return OTHER
        return CONTINUE

    def _reserve(self, extend: int, max_new: int) -> None:
        """``_update_prefill_budget`` with ``PrefillBudget.reserve``: one page of
        allocation overhead per request (``per_req_token_overhead``)."""
        paged = -(-extend // self.page) * self.page
        immediate = paged + self.page
        self.total_offset += immediate + max_new
        self.current_offset += immediate
        self.rem_input -= paged
        if self.rem_chunk is not None:
            self.rem_chunk -= paged

    # -- requests --------------------------------------------------------------
    def add_chunked(self, req: Any) -> bool:
        """``add_chunked_req``: the in-flight chunk continues with what is left of
        the chunk budget (bounded by ``remaining_total`` while that is positive);
        returns whether it is still unfinished after this chunk."""
        chunk = self.rem_chunk
        assert chunk is not None  # a request is only ever chunked with chunking on
        rem = min(chunk, int(self.rem_total))
        if rem <= 0:
            rem = chunk  # single-pool continuation must make progress
        cand = req.fill_len - req.prefix_len
        truncated = cand > rem
        n = min(cand, rem)
        req.extend_end = req.prefix_len + n
        self.can_run.append(req)
        self._reserve(n, 0 if truncated else min(req.max_new_tokens, self.clip))
        return truncated

    def add_one(self, req: Any) -> str:
        """``add_one_req`` → ``_select_prefill_admission`` → ``_commit_prefill_admission``;
        returns the ``AddReqResult`` that decides whether the walk goes on."""
        sched = self.sched
        tree = sched.tree
        page = self.page
        clip = self.clip
        max_new = min(max(req.max_new_tokens - req.out, 0), clip)
        prefix = req.prefix_len
        cand = req.fill_len - prefix
        total_tokens = cand + max_new + page  # + per_req_token_overhead
        node = req.last_node
        if node is not None:
            tree.inc_lock_ref(node)  # the temporary pin of add_one_req's _lock_node
        try:
            if not total_tokens < self.rem_total:  # PrefillBudget.check_prefill
                return NO_TOKEN
            paged = -(-cand // page) * page
            if self.rem_chunk is None and self.can_run and paged >= self.rem_input:
                return OTHER  # without chunking the first request may exceed the input cap
            extend = cand
            reserve_new = min(req.max_new_tokens, clip)
            chunked = False
            if self.rem_chunk is not None and paged > self.rem_chunk:
                extend = self.rem_chunk // page * page
                extend = (prefix + extend) // page * page - prefix
                if extend <= 0:
                    return OTHER
                chunked = True
                reserve_new = 0
            # _commit_prefill_admission: the request keeps its prefix locked
            req.extend_end = prefix + extend
            if node is not None:
                tree.inc_lock_ref(node)
            req.lock_node = node
            self.can_run.append(req)
            if chunked:
                self.new_chunked = req
            self._reserve(extend, reserve_new)
        finally:
            if node is not None:
                tree.dec_lock_ref(node)
        return self.budget_state()

    def add_one_ignore_eos(self, req: Any) -> str:
        """``add_one_req_ignore_eos`` (sglang 0.5.23 schedule_policy.py:1241-1383),
        taken by ``add_one_req`` for an ``ignore_eos`` request when the tree cache is
        disabled (:1401-1402): no prefix (the disabled tree matches nothing), no
        input-cap stop of its own. The request must fit ``min(remaining_current,
        remaining_total)`` with its page-rounded extend plus one page
        (``PrefillBudget.can_allocate_prefill``); then the batch's and the running
        requests' (remaining output, tokens held) pairs, sorted by remaining output,
        must leave more than one token per request still decoding at every point
        where the shortest finishes and frees what it held (:1259-1302)."""
        page = self.page
        cand = req.fill_len - req.prefix_len
        paged_input = -(-cand // page) * page + page  # + per_req_token_overhead
        free = self._free_and_evictable()
        if not paged_input <= min(free - self.current_offset, free - self.total_offset):
            return NO_TOKEN
        states = self.req_states
        if states is None:
            states = self.req_states = []
            for r in (req, *self.running, *self.can_run):
                _add_req_state(states, r, insert_sort=False)
            states.sort(key=lambda x: x[0])
        else:
            _add_req_state(states, req, insert_sort=True)
        cur_rem = free - self.current_offset - paged_input
        freed = 0
        for i, (left, occupied) in enumerate(states):
            bs = len(states) - i
            if cur_rem + freed - left * bs <= bs:  # IGNORE_EOS_RESERVE_TOKENS * bs
                return NO_TOKEN
            freed += occupied
        chunk = self.rem_chunk
        if chunk is None or cand <= chunk:
            req.extend_end = req.fill_len
            self.can_run.append(req)
            self._reserve(cand, min(req.max_new_tokens, self.clip))
        else:
            if chunk <= 0:
                return OTHER
            req.extend_end = req.prefix_len + chunk  # unaligned: floor_chunked_tokens leaves it
            self.can_run.append(req)
            self.new_chunked = req
            self._reserve(chunk, 0)
        req.lock_node = None
        return self.budget_state()


def _add_req_state(states: list[tuple[float, int]], r: Any, *, insert_sort: bool) -> None:
    """``add_req_state`` of ``add_one_req_ignore_eos`` (schedule_policy.py:1259-1277):
    every request is ``ignore_eos`` here, so its ratio is 1.0. The sorted insert
    keeps SGLang's loop exactly, including that a request outlasting all the others
    goes in *before* the last one (the loop variable ends at the last index)."""
    left = r.max_new_tokens * 1.0 - r.out
    if left <= 0:
        return
    state = (left, r.request.prompt_tokens + r.out)
    if not insert_sort:
        states.append(state)
        return
    i = 0
    for i in range(len(states)):
        if left <= states[i][0]:
            break
    states.insert(i, state)
