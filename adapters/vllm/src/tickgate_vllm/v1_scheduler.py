"""The ``vllm-v1`` scheduler: vLLM 0.33's v1 ``Scheduler.schedule()`` +
``update_from_output()`` for text-only requests, step for step.

One step, as in vLLM (see docs/vllm.md for the full list and what is not mirrored):

1. Running requests, in running-queue order, each get
   ``min(tokens still to compute, long_prefill_token_threshold, budget left)``
   tokens (the threshold only when more than one request is in the engine).
   Their blocks are allocated on demand; when the pool is short, the victim
   (fcfs: last in the running queue; priority: worst ``(priority, arrival)``)
   is preempted by recompute: its blocks are freed and it goes back to the
   front of the waiting queue. A fcfs request that has to preempt itself ends
   the running pass; a priority one lets the better requests after it go on.
2. Only if nothing was preempted: waiting requests in queue order (fcfs, or
   ``(priority, arrival)``) while budget and ``max_num_seqs`` allow, with
   strict head-of-line blocking. Prefix-cache hits are whole cached blocks of
   the request's chained block hashes, at most ``num_tokens - 1`` tokens. The
   head is admitted only if the blocks for its whole sequence fit
   (``scheduler_reserve_full_isl``) and those for this step's chunk fit,
   keeping ``watermark * num_gpu_blocks`` free while anything runs. Without
   chunked prefill a prompt that does not fit the budget stops admission.
3. Every request whose prefill is complete samples one token; a request that
   reaches ``max_output_tokens`` (or ``max_model_len``) finishes and frees its
   blocks in reverse order.

Speed: a step that only decodes (every running request one token, nothing
admitted, preempted or finished) is followed by identical steps until the
next arrival, completion, or the first step whose block allocations no longer
fit. Those are computed in one go (:meth:`_steady_span`): O(running requests)
per span, not per step. Under fcfs with nothing waiting, the decode-only step
that follows an admission or a completion starts such a span itself
(:meth:`_fresh_span`), and the step that ends a span because requests sample
their last token skips the full step's admission pass
(:meth:`_finishing_decode_step`). The record carries only per-step decisions so these
steps are identical; the KV figures in it are sampled when the decisions
change (docs/vllm.md, "Trace records"), exact per-step figures are in the
scheduler summary.

Under fcfs, while every running request is such a plain decoder, the requests
form a *decode group* (:meth:`_group_enter`): a step or a span moves one decode
clock instead of visiting each request, what a span needs of them is kept as
aggregates, and a request's fields are brought up to date only when they are
needed (:meth:`_sync`). Steps and spans then cost their events (an arrival, a
completion, the count of blocks taken), not their running requests. The
per-request paths above remain for what the group does not cover (a prompt in
chunked prefill, a resumed request, a preemption, priority, an observer).

The full step under fcfs is one pass per queue (:meth:`_full_step_fcfs`:
nothing scheduled is ever un-scheduled, so each request is settled when
visited); priority keeps the reference two-pass :meth:`_full_step`. Block
pool work is done on runs of blocks with C-level dict/list operations
(:mod:`.v1_pool`), blocks keyed to one request are registered when it
releases them (:meth:`_cache`), and each record carries its ``detail``
pre-encoded for the fingerprint (``tickgate.report.EncodedDetail``).
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from itertools import chain, repeat
from typing import Any, Callable, Hashable, Iterable, Mapping

from tickgate.blockruns import run_starts
from tickgate.errors import PluginError
from tickgate.interfaces import BuildContext, Horizon, Scheduler
from tickgate.model import Request, RequestOutcome, TickRecord, tick_record
from tickgate.report import EncodedDetail
from tickgate.timing import TimingModel

from .v1_pool import BlockPool
from .v1_options import OPTIONS_SCHEMA, V1Config

WAITING, RUNNING, PREEMPTED = 0, 1, 2
_LENGTH_CAPPED = ("length_capped",)
_encode_str = json.encoder.encode_basestring_ascii  # json.dumps of a str (ensure_ascii)


class _Req:
    """Scheduler state of one request (vLLM's ``Request`` fields that matter)."""

    __slots__ = ("r", "ordinal", "M", "prio", "T", "nc", "no", "held", "blocks", "ncached",
                 "status", "npre", "pkeys", "npk", "cmark", "id", "eid", "dentry", "djson", "admitted_tick", "first_tick", "first_ms",
                 "hit_first", "arrival_tick", "arrival_ms", "rseq", "d0", "ph")

    def __init__(self, r: Request, ordinal: int, pkeys: list[Hashable], tick: int,
                 arrival_ms: float | None) -> None:
        self.r = r
        self.ordinal = ordinal
        self.M = r.max_output_tokens
        self.prio = r.priority
        self.T = r.prompt_tokens  # num_tokens: prompt + sampled output
        self.nc = 0  # num_computed_tokens
        self.no = 0  # output tokens sampled
        self.held = 0  # blocks held
        self.blocks: list[int] = []  # block ids (prefix-caching mode)
        self.ncached = 0  # leading blocks registered in the prefix cache
        self.status = WAITING
        self.npre = 0
        self.pkeys = pkeys
        self.npk = len(pkeys)
        self.cmark = 0  # leading blocks registered, logically (see _cache)
        self.id = r.id
        self.eid = _encode_str(r.id) if type(r.id) is str else None  # the id as JSON
        # its sched entry when it decodes one token, and that entry as JSON (for
        # str ids: details are pre-encoded only then); one pair per request, reused
        # by every record it decodes in
        self.dentry: list[Any] = [r.id, 1, "running"]
        self.djson = f'[{self.eid},1,"running"]' if self.eid is not None else ""
        self.admitted_tick: int | None = None
        self.first_tick: int | None = None
        self.first_ms: float | None = None
        self.hit_first = 0
        self.arrival_tick = tick
        self.arrival_ms = arrival_ms
        self.rseq = 0  # when it joined the running queue (its order there)
        self.d0 = 0  # decode clock its fields hold at, while in a decode group
        self.ph = 0  # decode-clock phase of its block allocations, while in a decode group

    def key(self, i: int) -> Hashable:
        """Chained hash of block ``i``: shared content for known prompt blocks,
        otherwise unique to this request (its outputs never repeat elsewhere)."""
        pk = self.pkeys
        return pk[i] if i < len(pk) else (self.ordinal, i)

    def __lt__(self, other: "_Req") -> bool:  # priority queue order, as vLLM's Request.__lt__
        return (self.prio, self.ordinal) < (other.prio, other.ordinal)


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
            parent = hash((parent, ids[i * block_size:(i + 1) * block_size]))
            keys.append(parent)
    elif r.prefix_blocks is not None:
        wbs = prefix_block_size or block_size
        if wbs >= block_size:
            per = wbs // block_size
            ids = r.prefix_blocks[:-(-full // per)]
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
                parent = hash((parent, ids[i * per:(i + 1) * per]))
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
    for start, stop in zip(starts, starts[1:] + [len(ids)]):
        first = ids[start]
        base = hash((parent, first))
        bases.append(base)
        ends.append(base + (stop - start) * per)
        parent = hash((parent, first, stop - start))
    return list(chain.from_iterable(map(range, bases, ends)))


class VllmV1Scheduler(Scheduler):
    name = "vllm-v1"
    description = "vLLM 0.33 v1 scheduler (fcfs/priority, chunked prefill, prefix caching, recompute preemption)."
    options_schema = OPTIONS_SCHEMA
    uses_admission_policy = False
    uses_kv_allocator = False
    admission_note = ("vLLM admits strictly in its own waiting-queue order (fcfs or priority) with "
                      "head-of-line blocking; an external admission policy would change the semantics")

    def __init__(self, cfg: V1Config, ctx: BuildContext) -> None:
        self.cfg = cfg
        self.bs = cfg.block_size
        self.clock = ctx.clock
        self.timing = ctx.timing
        self.prefix_bs = ctx.prefix_block_size
        if self.prefix_bs is not None and self.prefix_bs % self.bs and self.bs % self.prefix_bs:
            from tickgate.errors import TickgateError

            raise TickgateError(f"vllm-v1: the workload's prefix blocks cover {self.prefix_bs} tokens and "
                                f"block_size is {self.bs}; one must be a multiple of the other")
        self.pool = BlockPool(cfg.num_gpu_blocks, cfg.enable_prefix_caching)
        self.caching = cfg.enable_prefix_caching
        self.priority = cfg.policy == "priority"
        self.maxlen = cfg.max_model_len
        self.wm_blocks = int(cfg.watermark * cfg.num_gpu_blocks)
        self.running: list[_Req] = []
        self.waiting_fifo: deque[_Req] = deque()
        self.waiting_heap: list[_Req] = []
        self.outcomes: list[RequestOutcome] = []
        self.rejected_now: list[str] = []
        self.ordinal = 0
        self.max_span = cfg.max_span
        #: called with a dict per executed step (conformance); forces single steps
        self.observer: Callable[[dict[str, Any]], None] | None = None
        # steady-state fast path: the last step only decoded, nothing changed since
        self.steady = False
        self.finish_next = False  # see _steady_span
        self.last_body: tuple[Any, ...] | None = None
        self.last_record: TickRecord | None = None
        self._span_duration: float | None = None  # of the last span, timed replays
        self.kv_sample = (0, self.pool.usable)
        self.plain_ids = True  # every request id is a str (records carry pre-encoded details)
        self.rseq = 0  # running-queue joins so far
        # the decode group (see _group_enter): every running request, decoding,
        # with its fields as of the decode clock ``D`` when it joined
        self.grouped = False
        self.group_ok = not self.priority and self.max_span != 1
        self.D = 0
        self.phase = [0] * (2 * self.bs)  # members by allocation phase, twice over (window sums)
        self.fin: list[tuple[int, int, _Req]] = []  # (step of its last token, rseq, member), a heap
        self.ctx = 0  # the members' tokens at D: the context of the next decode step
        self.pending: list[int] = []  # blocks popped for members, not yet dealt out
        self.members_view: tuple[tuple[str, ...], list[Any], list[str]] | None = None
        self.not_plain: _Req | None = None  # the running request that kept the group from forming
        # totals for extra_summary
        self.t_preemptions = 0
        self.t_admissions = 0
        self.t_hit_tokens = 0
        self.t_query_tokens = 0
        self.t_first_hit_tokens = 0
        self.t_first_query_tokens = 0
        self.t_sched_tokens = 0
        self.t_steps = 0
        self.tok_hist: dict[int, int] = {}
        self.kv_peak = 0
        self.kv_weighted = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> "VllmV1Scheduler":
        return cls(V1Config.from_options(options), ctx)

    # -- engine protocol -------------------------------------------------------
    def add(self, request: Request) -> None:
        cfg = self.cfg
        p = request.prompt_tokens
        timed = self.timing is not None
        arrival_ms = request.arrival_ms if request.arrival_ms is not None else (
            self.clock.now_ms if timed else None)
        if self.maxlen is not None and p >= self.maxlen:
            self._reject(request, arrival_ms, f"prompt of {p} tokens >= max_model_len {self.maxlen} "
                                              "(vLLM rejects it before scheduling)",
                         key="prompt reaches max_model_len (vLLM rejects it before scheduling)",
                         figures={"prompt_tokens": p, "max_model_len": self.maxlen})
            return
        last = p + request.max_output_tokens
        if self.maxlen is not None:
            last = min(last, self.maxlen)
        need = -(-(last - 1) // self.bs)
        if need > self.pool.usable:
            self._reject(request, arrival_ms, f"needs {need} KV blocks of {self.bs} tokens; the pool has "
                                              f"{self.pool.usable} (vLLM would stall on it)",
                         key="needs more KV blocks than the pool has (vLLM would stall on it)",
                         figures={"needed_blocks": need, "block_tokens": self.bs, "pool_blocks": self.pool.usable})
            return
        if not cfg.enable_chunked_prefill:
            # without chunking the whole prompt must fit one step's budget (vLLM
            # refuses max_num_batched_tokens < max_model_len at start-up); a prefix
            # hit is not guaranteed, so waiting for one could stall the replay
            if p > cfg.max_num_batched_tokens:
                self._reject(request, arrival_ms, f"prompt of {p} tokens > max_num_batched_tokens "
                             f"{cfg.max_num_batched_tokens} with chunked prefill off (vLLM would never "
                             "schedule it)",
                             key="prompt exceeds max_num_batched_tokens with chunked prefill off "
                                 "(vLLM would never schedule it)",
                             figures={"prompt_tokens": p, "max_num_batched_tokens": cfg.max_num_batched_tokens})
                return
        pkeys = prompt_block_keys(request, self.bs, self.prefix_bs) if cfg.enable_prefix_caching else []
        q = _Req(request, self.ordinal, pkeys, self.clock.tick, arrival_ms)
        if q.eid is None:
            self.plain_ids = False
        self.ordinal += 1
        if self.priority:
            heapq.heappush(self.waiting_heap, q)
        else:
            self.waiting_fifo.append(q)
        self.steady = False

    def has_work(self) -> bool:
        return bool(self.running) or bool(self.waiting_fifo) or bool(self.waiting_heap) or bool(self.rejected_now)

    def pop_outcomes(self) -> list[RequestOutcome]:
        out, self.outcomes = self.outcomes, []
        return out

    def kv_capacity_pages(self) -> int:
        return self.pool.usable

    def kv_used_pages(self) -> int:
        return self.pool.used

    def decode_slots_per_tick(self) -> int:
        return self.cfg.max_num_seqs

    def _n_waiting(self) -> int:
        return len(self.waiting_heap) if self.priority else len(self.waiting_fifo)

    # -- one step ---------------------------------------------------------------
    def step(self, horizon: Horizon) -> TickRecord:
        finishing = self.finish_next  # set by the span just applied, if it ended where a request finishes
        self.finish_next = False
        if self.group_ok and self.observer is None:
            if self.grouped or self._group_enter():
                if not finishing and (self.steady or (not self.waiting_fifo and not self.rejected_now)):
                    record = self._group_span(horizon)
                    if record is not None:
                        return record
                record = self._group_step()
                if record is not None:
                    return record
                self._group_leave()
        elif self.grouped:
            self._group_leave()
        if self.observer is None and self.max_span != 1:
            if self.steady:
                if not finishing:
                    span = self._steady_span(horizon)
                    if span > 0:
                        return span_record(self, span)
                if not self.priority and not self.waiting_fifo and not self.rejected_now:
                    record = self._finishing_decode_step()
                    if record is not None:
                        return record
            elif not self.priority and not self.waiting_fifo and not self.rejected_now and self.running:
                record = self._fresh_span(horizon)
                if record is not None:
                    return record
        if self.priority:
            return self._full_step()
        return self._full_step_fcfs()

    def _finishing_decode_step(self) -> TickRecord | None:
        """The step that ends a steady run because requests sample their last token.

        After a decode-only step (fcfs, nothing waiting or rejected since), every
        running request decodes one token again; if this step's new blocks fit
        (none is preempted), it is :meth:`_full_step_fcfs` with nothing to admit:
        each request is settled in running order (block, registration, sampled
        token), then the finished ones are released. ``None``: run the full step.
        """
        running = self.running
        bs = self.bs
        maxlen = self.maxlen
        a0 = 0
        for q in running:
            T = q.T
            if q.nc + 1 != T or not q.no or (maxlen is not None and T >= maxlen):
                return None
            if T > q.held * bs:
                a0 += 1
        pool = self.pool
        if a0 > pool.free or not running or len(running) > self.cfg.max_num_batched_tokens:
            return None
        tick = self.clock.tick
        caching = self.caching
        decoded = []
        sched_json = []
        sj = []
        finished: list[_Req] = []
        context = 0
        for q in running:
            T = q.T
            if T > q.held * bs:
                q.held += 1
                if caching:
                    pool.allocate(1, q.blocks)
                else:
                    pool.take(1)
            if caching and T // bs > q.cmark:
                self._cache(q, T // bs)
            q.nc = T
            context += T
            decoded.append(q.id)
            sched_json.append(q.dentry)
            sj.append(q.djson)
            q.no = no = q.no + 1
            q.T = T = T + 1
            if no >= q.M or (maxlen is not None and T >= maxlen):
                finished.append(q)
        r = len(running)
        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        duration = self.timing.step_ms(0, r, context) if self.timing is not None else None
        end_ms = self.clock.now_ms + duration if duration is not None else None
        completed: list[str] = []
        if finished:
            gone = set(finished)
            self.running = [q for q in running if q not in gone]
            completed = self._finish(finished, tick, end_ms)
        self.steady = not finished
        self._count_step(r, kv_after_sched)
        body = ((), 0, tuple(decoded), r, 0, r, 0, tuple(completed), (), (), sched_json)
        return self._record(tick, body, kv_after_sched, free_after_sched, 1, duration, sj)

    def _fresh_span(self, horizon: Horizon) -> TickRecord | None:
        """A span of decode-only steps starting now, after a step that was not one
        (it admitted, finished, prefilled...), when this step is decode-only too.

        Under fcfs with nothing waiting or rejected, a step in which every running
        request has its prompt done and decodes one token (``nc == T - 1``, an output
        sampled), all within the budget, is decode-only unless a block allocation
        does not fit or a request finishes; :meth:`_steady_span` rules those out
        (it assumes nothing of the previous step but a blocked waiting head, and
        nothing waits). The record is the one :meth:`_full_step_fcfs` would build
        for this step (KV sampled after its allocations), spanning the whole run.
        """
        running = self.running
        if len(running) > self.cfg.max_num_batched_tokens:
            return None
        bs = self.bs
        a0 = 0  # blocks allocated in this step
        decoded = []
        sched_json = []
        sj = []
        for q in running:
            T = q.T
            if q.nc + 1 != T or not q.no:
                return None
            if T > q.held * bs:
                a0 += 1
            decoded.append(q.id)
            sched_json.append(q.dentry)
            sj.append(q.djson)
        pool = self.pool
        free0 = pool.free - a0
        kv0 = pool.usable - free0
        span = self._steady_span(horizon)
        if span <= 0:
            return None
        r = len(running)
        self.steady = True
        body = ((), 0, tuple(decoded), r, 0, r, 0, (), (), (), sched_json)
        return self._record(self.clock.tick, body, kv0, free0, span, self._span_duration, sj)

    def _full_step(self) -> TickRecord:
        """One step, any policy (the reference implementation; priority uses it)."""
        tick = self.clock.tick
        cfg = self.cfg
        bs = self.bs
        pool = self.pool
        caching = self.caching
        maxlen = self.maxlen
        running = self.running
        budget = cfg.max_num_batched_tokens
        n_waiting = self._n_waiting()
        thr = cfg.long_prefill_token_threshold if len(running) + n_waiting > 1 else 0
        sched: dict[_Req, list[Any]] = {}  # req -> [tokens, kind, computed_before]
        preempted: list[_Req] = []
        idx = 0
        while idx < len(running) and budget > 0:
            q = running[idx]
            n = q.T - q.nc
            if 0 < thr < n:
                n = thr
            if n > budget:
                n = budget
            if maxlen is not None and n > maxlen - q.nc - 1:
                n = maxlen - q.nc - 1
            if n <= 0:
                idx += 1
                continue
            slot = q.nc + n
            if maxlen is not None and slot > maxlen:
                slot = maxlen
            ok = True
            while True:
                need = -(-slot // bs) - q.held
                if need <= pool.free:
                    break
                if self.priority:
                    victim = max(running, key=_victim_key)
                    vi = running.index(victim)
                    del running[vi]
                    if vi < idx:
                        idx -= 1
                    entry = sched.pop(victim, None)
                    if entry is not None:
                        budget += entry[0]
                else:
                    victim = running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is q:
                    ok = False
                    break
            if not ok:
                if self.priority:
                    continue
                break
            if need > 0:
                self._grow(q, need)
            if caching:
                self._cache(q, min(q.nc + n, q.T) // bs)
            sched[q] = [n, "running", q.nc]
            budget -= n
            idx += 1

        admitted_blocks = 0
        if not preempted:
            while budget > 0:
                if self.priority:
                    if not self.waiting_heap:
                        break
                    q = self.waiting_heap[0]
                else:
                    if not self.waiting_fifo:
                        break
                    q = self.waiting_fifo[0]
                plan = self._admission(q, budget, thr)
                if plan is None:
                    break
                hits, n, new_blocks = plan
                if self.priority:
                    heapq.heappop(self.waiting_heap)
                else:
                    self.waiting_fifo.popleft()
                hit = len(hits) * bs  # before _admit: the list becomes its blocks
                self._admit(q, hits, n, new_blocks, tick)
                admitted_blocks += new_blocks
                kind = "resumed" if q.npre > 0 else "new"
                q.nc = hit
                sched[q] = [n, kind, hit]
                budget -= n

        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        # _update_after_schedule, then the fake model output: one token for
        # every request whose prefill is complete.
        prefill_tokens = decode_tokens = context = total = 0
        decoded: list[str] = []
        sampled: list[_Req] = []
        sched_json: list[list[Any]] = []
        admitted: list[str] = []
        pure_decode = not preempted
        for q, (n, kind, before) in sched.items():
            total += n
            context += before + n
            if kind == "running":
                sched_json.append([q.r.id, n, kind])
            else:
                sched_json.append([q.r.id, n, kind, before])
                admitted.append(q.r.id)
                pure_decode = False
            # As the reference harness counts: a chunk ending at the newest
            # sampled token decodes its last position; the rest is prefill
            # (prompt or recompute after preemption).
            if q.no > 0 and before + n == q.T:
                decode_tokens += 1
                if n != 1:
                    prefill_tokens += n - 1
                    pure_decode = False
            else:
                prefill_tokens += n
                pure_decode = False
            q.nc = before + n
            if q.nc >= q.T:
                sampled.append(q)
                decoded.append(q.r.id)
        if len(sched) != len(running):
            pure_decode = False
        duration, end_ms = self._step_time(prefill_tokens, decode_tokens, context, (), tick)
        completed: list[str] = []
        finished: list[_Req] = []
        for q in sampled:
            q.no += 1
            q.T += 1
            if q.first_tick is None:
                q.first_tick = tick
                q.first_ms = end_ms
            if q.no >= q.M or (maxlen is not None and q.T >= maxlen):
                finished.append(q)
                completed.append(q.r.id)
        if finished:
            pure_decode = False
            gone = set(finished)
            self.running = running = [q for q in running if q not in gone]
            for q in finished:
                self._release(q, finished=True)
                self.outcomes.append(self._outcome(q, tick, end_ms))
        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        self.steady = pure_decode and not rejected
        self.t_preemptions += len(preempted)
        self._count_step(total, kv_after_sched)
        if self.observer is not None:
            self.observer({
                "step": tick,
                "sched": [[q.r.id, e[0], e[1], e[2]] for q, e in sched.items()],
                "num_tokens": total,
                "preempted": [q.r.id for q in preempted],
                "finished": completed,
                "free_blocks_after_sched": free_after_sched,
                "running_after_sched": len(running) + len(finished),
                "free_blocks": pool.free,
                "running": len(running),
                "waiting": self._n_waiting(),
            })
        body = (tuple(admitted), prefill_tokens, tuple(decoded), decode_tokens, self._n_waiting(),
                len(running) + len(finished), admitted_blocks, tuple(completed),
                tuple(q.r.id for q in preempted), rejected, sched_json)
        if body != self.last_body:
            self.kv_sample = (kv_after_sched, free_after_sched)
            self.last_body = body
        record = TickRecord(
            tick=tick, admitted=body[0], prefill_tokens=prefill_tokens, decoded=body[2],
            decode_tokens=decode_tokens, queued=body[4], active=body[5],
            kv_pages_used=self.kv_sample[0], kv_pages_reserved=admitted_blocks,
            completed=body[7], preempted=body[8], rejected=rejected,
            duration_ms=duration,
            detail={"sched": sched_json, "free_blocks": self.kv_sample[1]},
        )
        self.last_record = record
        return record

    def _full_step_fcfs(self) -> TickRecord:
        """:meth:`_full_step` for fcfs, in one pass per queue.

        Under fcfs nothing already scheduled in a step is ever un-scheduled (the
        victim is always the last of the running queue, not yet visited), so each
        request's schedule, computed tokens and sampled token are settled when it
        is visited; the decode-only request (one token, no new block, nothing to
        register) is the short path. Decisions are those of :meth:`_full_step`
        (the conformance fixtures run both policies through the observer).
        """
        tick = self.clock.tick
        cfg = self.cfg
        bs = self.bs
        pool = self.pool
        caching = self.caching
        maxlen = self.maxlen
        running = self.running
        budget = cfg.max_num_batched_tokens
        waiting = self.waiting_fifo
        thr = cfg.long_prefill_token_threshold if len(running) + len(waiting) > 1 else 0
        observer = self.observer
        obs: list[list[Any]] = []
        preempted: list[_Req] = []
        sched_json: list[list[Any]] = []
        sj: list[str] = []  # sched_json's entries as JSON
        decoded: list[str] = []
        firsts: list[_Req] = []
        finished: list[_Req] = []
        prefill_tokens = decode_tokens = context = total = 0
        pure_decode = True
        nsched = 0
        idx = 0
        plain = maxlen is None and observer is None
        while idx < len(running) and budget > 0:
            q = running[idx]
            nc = q.nc
            T = q.T
            n = T - nc
            if n == 1 and plain and T <= q.held * bs and q.no:
                # the common case, short: it decodes one token in the blocks it holds
                if caching and T // bs > q.cmark:
                    self._cache(q, T // bs)
                q.nc = T
                budget -= 1
                total += 1
                context += T
                nsched += 1
                sched_json.append(q.dentry)
                sj.append(q.djson)
                decode_tokens += 1
                decoded.append(q.id)
                q.no = no = q.no + 1
                q.T = T + 1
                if no >= q.M:
                    finished.append(q)
                idx += 1
                continue
            if n != 1:
                if 0 < thr < n:
                    n = thr
                if n > budget:
                    n = budget
            if maxlen is not None and n > maxlen - nc - 1:
                n = maxlen - nc - 1
            if n <= 0:
                idx += 1
                continue
            slot = nc + n
            if maxlen is not None and slot > maxlen:
                slot = maxlen
            if slot > q.held * bs:
                ok = True
                while True:
                    need = -(-slot // bs) - q.held
                    if need <= pool.free:
                        break
                    victim = running.pop()
                    self._preempt(victim)
                    preempted.append(victim)
                    if victim is q:
                        ok = False
                        break
                if not ok:
                    break
                if need > 0:
                    self._grow(q, need)
            nc += n
            if caching and (nc if nc < T else T) // bs > q.cmark:
                self._cache(q, (nc if nc < T else T) // bs)
            q.nc = nc
            budget -= n
            total += n
            context += nc
            nsched += 1
            if n == 1:
                sched_json.append(q.dentry)
                sj.append(q.djson)
            else:
                sched_json.append([q.id, n, "running"])
                sj.append(f'[{q.eid},{n},"running"]')
            if observer is not None:
                obs.append([q.id, n, "running", nc - n])
            if nc >= T:
                decoding, prefill = self._sample(q, n, decoded, firsts, finished)
                decode_tokens += decoding
                if prefill:
                    prefill_tokens += prefill
                    pure_decode = False
            else:
                prefill_tokens += n
                pure_decode = False
            idx += 1

        admitted: list[str] = []
        admitted_blocks = 0
        if not preempted:
            budget, total, context, nsched, prefill_tokens, decode_tokens, admitted_blocks = self._admit_fcfs(
                tick, budget, thr, total, context, nsched, prefill_tokens, decode_tokens,
                sched_json, sj, decoded, admitted, firsts, finished, obs)
            if admitted:
                pure_decode = False

        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        if preempted or nsched != len(running):
            pure_decode = False
        duration, end_ms = self._step_time(prefill_tokens, decode_tokens, context, firsts, tick)
        completed: list[str] = []
        if finished:
            pure_decode = False
            gone = set(finished)
            self.running = running = [q for q in running if q not in gone]
            completed = self._finish(finished, tick, end_ms)
        rejected = tuple(self.rejected_now)
        if rejected:
            self.rejected_now = []
        self.steady = pure_decode and not rejected
        self.t_preemptions += len(preempted)
        self._count_step(total, kv_after_sched)
        n_waiting = len(waiting)
        if observer is not None:
            observer({
                "step": tick,
                "sched": obs,
                "num_tokens": total,
                "preempted": [q.id for q in preempted],
                "finished": completed,
                "free_blocks_after_sched": free_after_sched,
                "running_after_sched": len(running) + len(finished),
                "free_blocks": pool.free,
                "running": len(running),
                "waiting": n_waiting,
            })
        body = (tuple(admitted), prefill_tokens, tuple(decoded), decode_tokens, n_waiting,
                len(running) + len(finished), admitted_blocks, tuple(completed),
                tuple([q.id for q in preempted]) if preempted else (), rejected, sched_json)
        return self._record(tick, body, kv_after_sched, free_after_sched, 1, duration, sj)

    def _admission(self, q: _Req, budget: int, thr: int) -> tuple[list[int], int, int] | None:
        """vLLM's checks for admitting waiting request ``q`` now: its cached
        blocks, the tokens it gets and the blocks it needs, or ``None`` if it
        has to wait (and with it everything behind it)."""
        cfg = self.cfg
        if len(self.running) >= cfg.max_num_seqs:
            return None
        bs = self.bs
        pool = self.pool
        maxlen = self.maxlen
        T = q.T
        hits = pool.lookup(q.pkeys, (T - 1) // bs, q.key) if self.caching else []
        h = len(hits)
        hit = h * bs
        n = T - hit
        if 0 < thr < n:
            n = thr
        if not cfg.enable_chunked_prefill and n > budget:
            return None
        if n > budget:
            n = budget
        wm = self.wm_blocks if self.running else 0
        evictable = pool.evictable(hits) if h else 0
        if cfg.scheduler_reserve_full_isl:
            full = T if maxlen is None else min(T, maxlen)
            if max(-(-full // bs) - h, 0) + evictable + wm > pool.free:
                return None
        slot = hit + n
        if maxlen is not None and slot > maxlen:
            slot = maxlen
        new_blocks = max(-(-slot // bs) - h, 0)
        if new_blocks + evictable + wm > pool.free:
            return None
        return hits, n, new_blocks

    def _admit(self, q: _Req, hits: list[int], n: int, new_blocks: int, tick: int) -> None:
        """Admit ``q``, taken off its queue by the caller, for ``n`` tokens: its
        cached blocks and new ones (``hits`` becomes its block list), the blocks
        it completes registered, into the running queue, counted. Its computed
        tokens are the caller's."""
        bs = self.bs
        h = len(hits)
        hit = h * bs
        T = q.T
        if self.caching:
            self.pool.touch(hits)
            q.blocks = hits
            q.ncached = q.cmark = h
        q.held = h
        if new_blocks:
            self._grow(q, new_blocks)
        if self.caching:
            self._cache(q, min(hit + n, T) // bs)
        self.running.append(q)
        self.rseq += 1
        q.rseq = self.rseq
        q.status = RUNNING
        self.t_admissions += 1
        self.t_hit_tokens += hit
        self.t_query_tokens += T
        if q.admitted_tick is None:
            q.admitted_tick = tick
            q.hit_first = hit
            self.t_first_hit_tokens += hit
            self.t_first_query_tokens += T

    def _admit_fcfs(self, tick: int, budget: int, thr: int, total: int, context: int, nsched: int,
                    prefill_tokens: int, decode_tokens: int, sched_json: list[list[Any]], sj: list[str],
                    decoded: list[str], admitted: list[str], firsts: list[_Req], finished: list[_Req],
                    obs: list[list[Any]]) -> tuple[int, int, int, int, int, int, int]:
        """The waiting pass of a fcfs step: admit from the head of the queue while
        the budget, ``max_num_seqs`` and the pool allow (head-of-line blocking).

        Appends to the step's lists; returns the step's running figures updated
        (budget left, tokens, context, scheduled, prefill and decode tokens) and
        the blocks admission allocated.
        """
        bs = self.bs
        waiting = self.waiting_fifo
        observer = self.observer
        admitted_blocks = 0
        while budget > 0 and waiting:
            q = waiting[0]
            plan = self._admission(q, budget, thr)
            if plan is None:
                break
            hits, n, new_blocks = plan
            waiting.popleft()
            hit = len(hits) * bs  # before _admit: the list becomes its blocks
            self._admit(q, hits, n, new_blocks, tick)
            admitted_blocks += new_blocks
            T = q.T
            kind = "resumed" if q.npre > 0 else "new"
            nc = q.nc = hit + n
            sched_json.append([q.id, n, kind, hit])
            sj.append(f'[{q.eid},{n},"{kind}",{hit}]')
            admitted.append(q.id)
            if observer is not None:
                obs.append([q.id, n, kind, hit])
            budget -= n
            total += n
            context += nc
            nsched += 1
            if nc >= T:
                decoding, prefill = self._sample(q, n, decoded, firsts, finished)
                decode_tokens += decoding
                prefill_tokens += prefill
            else:
                prefill_tokens += n
        return budget, total, context, nsched, prefill_tokens, decode_tokens, admitted_blocks

    def _sample(self, q: _Req, n: int, decoded: list[str], firsts: list[_Req],
                finished: list[_Req]) -> tuple[int, int]:
        """``q``'s ``n`` tokens this step reach its newest token: it samples one
        (its first, or it finishes, go on those lists). Returns the step's decode
        and prefill tokens for it, as the reference harness counts them: a chunk
        ending at the newest sampled token decodes its last position, the rest
        is prefill."""
        no = q.no
        if no > 0:
            decoding, prefill = 1, n - 1
        else:
            decoding, prefill = 0, n
            firsts.append(q)
        decoded.append(q.id)
        q.no = no = no + 1
        q.T = T = q.T + 1
        if no >= q.M or (self.maxlen is not None and T >= self.maxlen):
            finished.append(q)
        return decoding, prefill

    def _step_time(self, prefill_tokens: int, decode_tokens: int, context: int, firsts: Iterable[_Req],
                   tick: int) -> tuple[float | None, float | None]:
        """The step's duration and end (timed replays; ``None`` otherwise); the
        requests in ``firsts`` sampled their first token in it."""
        duration = (self.timing.step_ms(prefill_tokens, decode_tokens, context)
                    if self.timing is not None else None)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        for q in firsts:
            q.first_tick = tick
            q.first_ms = end_ms
        return duration, end_ms

    def _finish(self, finished: Iterable[_Req], tick: int, end_ms: float | None) -> list[str]:
        """Release the requests that sampled their last token in this step, in
        order, with their outcomes; their ids."""
        completed = []
        for q in finished:
            completed.append(q.id)
            self._release(q, finished=True)
            self.outcomes.append(self._outcome(q, tick, end_ms))
        return completed

    def _count_step(self, tokens: int, kv_after_sched: int) -> None:
        """The summary's per-step figures: tokens scheduled, KV blocks after scheduling."""
        self.t_sched_tokens += tokens
        self.t_steps += 1
        hist = self.tok_hist
        hist[tokens] = hist.get(tokens, 0) + 1
        if kv_after_sched > self.kv_peak:
            self.kv_peak = kv_after_sched
        self.kv_weighted += kv_after_sched

    def _record(self, tick: int, body: tuple[Any, ...], kv_after_sched: int, free_after_sched: int,
                span: int, duration: float | None, sj: list[str]) -> TickRecord:
        """The record of a step (or span) whose decisions are ``body``: admitted,
        prefill tokens, decoded, decode tokens, queued, active, blocks reserved,
        completed, preempted, rejected, sched entries. Its KV figures are sampled
        when the decisions change and carried over while they repeat (docs/vllm.md,
        "Trace records"); ``sj`` is the sched entries as JSON."""
        if body != self.last_body:
            self.kv_sample = (kv_after_sched, free_after_sched)
            self.last_body = body
        kv_used, free_blocks = self.kv_sample
        record = tick_record(
            # tick, admitted, prefill_tokens, decoded, decode_tokens, queued, active,
            tick, body[0], body[1], body[2], body[3], body[4], body[5],
            # kv_pages_used, kv_pages_reserved, completed, preempted, rejected, span, duration_ms, detail
            kv_used, body[6], body[7], body[8], body[9], span, duration, self._detail(body[10], sj, free_blocks),
        )
        self.last_record = record
        return record

    def _detail(self, sched_json: list[list[Any]], sj: list[str], free_blocks: int) -> Any:
        """The record's ``detail``, with its canonical JSON when every id is a str."""
        if self.plain_ids and type(free_blocks) is int:
            return EncodedDetail({"sched": sched_json, "free_blocks": free_blocks},
                                 f'{{"free_blocks":{free_blocks},"sched":[{",".join(sj)}]}}')
        return {"sched": sched_json, "free_blocks": free_blocks}

    # -- the decode group ---------------------------------------------------------
    # Under fcfs, most steps decode every running request one token; a step then
    # changes each one's fields the same way (one more token, one more block every
    # block_size steps, at a phase of its own). While every running request is such
    # a plain decoder, they form a group: their fields stay as they were at the
    # decode clock ``D`` when they joined (``d0``), and a step or span moves the
    # clock instead of visiting each of them. What a span needs of them is kept as
    # aggregates: members per allocation phase (how many blocks n steps take, one
    # slice sum), a heap of the steps at which they sample their last token, their
    # context. Blocks the members take are popped from the pool when vLLM pops
    # them (free counts and evictions stay exact) and dealt out when a member's
    # fields are next needed (:meth:`_sync`); a block is only a label once popped,
    # so which member gets which one changes nothing. So a record costs its
    # events (arrivals, completions, allocations as counts), not its running
    # requests. Anything else (a request in prefill, a resumed request, which
    # registers its own blocks as it goes, a preemption, priority, an observer)
    # brings every member up to date and runs the step in full.

    def _plain(self, q: _Req) -> bool:
        """``q`` decodes one token per step in blocks allocated on demand, and
        registers nothing in the prefix cache while it runs (see :meth:`_cache`)."""
        T = q.T
        return (q.nc + 1 == T and q.no > 0 and 0 <= q.held * self.bs - T + 1 < self.bs
                and not (self.caching and (q.npre or q.ncached < q.npk)))

    def _left(self, q: _Req) -> int:
        """Steps before the one in which ``q`` samples its last token (``max_tokens``
        or ``max_model_len``)."""
        left = q.M - 1 - q.no
        if self.maxlen is not None and self.maxlen - 1 - q.T < left:
            left = self.maxlen - 1 - q.T
        return left

    def _group_enter(self) -> bool:
        """Form the decode group from the running queue, if every request is plain."""
        running = self.running
        blocker = self.not_plain
        if blocker is not None:
            if blocker in running and not self._plain(blocker):
                return False
            self.not_plain = None
        plain = self._plain
        for q in running:
            if not plain(q):
                self.not_plain = q
                return False
        D = self.D
        bs = self.bs
        phase = self.phase
        fin = []
        ctx = 0
        for q in running:
            T = q.T
            q.d0 = D
            ph = q.ph = (D + q.held * bs - T + 1) % bs
            phase[ph] += 1
            phase[ph + bs] += 1
            fin.append((D + self._left(q), q.rseq, q))
            ctx += T
        heapq.heapify(fin)
        self.fin = fin
        self.ctx = ctx
        self.grouped = True
        self.members_view = None
        return True

    def _join(self, q: _Req) -> None:
        """Add a plain running request to the group (its fields hold at ``D``)."""
        bs = self.bs
        D = self.D
        T = q.T
        q.d0 = D
        ph = q.ph = (D + q.held * bs - T + 1) % bs
        self.phase[ph] += 1
        self.phase[ph + bs] += 1
        heapq.heappush(self.fin, (D + self._left(q), q.rseq, q))
        self.ctx += T

    def _sync(self, q: _Req) -> None:
        """Bring member ``q``'s fields to the decode clock: its tokens, the blocks
        it took on the way (dealt from ``pending``), its logical cache mark."""
        D = self.D
        k = D - q.d0
        if k:
            bs = self.bs
            T = q.T
            x0 = q.d0 + q.held * bs - T + 1  # the step it took its next block in
            if D > x0:
                g = (D - 1 - x0) // bs + 1
                q.held += g
                # the KV mean counted these blocks from the end of their record on
                # (see _group_span); from the step that took each, it should
                self.kv_weighted -= g * x0 + bs * g * (g - 1) // 2
                if self.caching:
                    pending = self.pending
                    q.blocks += pending[-g:]
                    del pending[-g:]
            q.T = T + k
            q.no += k
            nc = q.nc = q.nc + k
            if self.caching and nc // bs > q.cmark:
                q.cmark = nc // bs
            q.d0 = D

    def _group_leave(self) -> None:
        """Bring every member up to date and dissolve the group."""
        if not self.grouped:
            return
        for q in self.running:
            self._sync(q)
        if self.pending:  # pragma: no cover - every popped block belongs to a member
            raise PluginError(f"vllm-v1: {len(self.pending)} blocks taken by the decode group were not dealt out")
        self.phase = [0] * (2 * self.bs)
        self.fin = []
        self.ctx = 0
        self.grouped = False

    def _members(self) -> tuple[tuple[str, ...], list[Any], list[str]]:
        """The members' ids, sched entries and their JSON, in running order (kept
        until the running queue changes)."""
        view = self.members_view
        if view is None:
            running = self.running
            view = self.members_view = (tuple([q.id for q in running]), [q.dentry for q in running],
                                        [q.djson for q in running])
        return view

    def _group_allocs(self, n: int) -> int:
        """Blocks the members take in the next ``n`` steps."""
        bs = self.bs
        rounds, rest = divmod(n, bs)
        total = len(self.running) * rounds
        if rest:
            start = self.D % bs
            total += sum(self.phase[start:start + rest])
        return total

    def _take(self, n: int) -> None:
        """Pop ``n`` blocks from the pool for the members."""
        if self.caching:
            self.pool.allocate(n, self.pending)
        else:
            self.pool.take(n)

    def _group_span(self, horizon: Horizon) -> TickRecord | None:
        """:meth:`_fresh_span` / :meth:`_steady_span` for the group: the identical
        decode-only steps up to the first last token, the horizon, or the first
        step whose blocks do not fit; ``None`` when there are none."""
        fin = self.fin
        if not fin:
            return None
        r = len(self.running)
        if r > self.cfg.max_num_batched_tokens:
            return None
        D = self.D
        last = fin[0][0] - D  # the step sampling somebody's last token is not steady
        limit = horizon.max_ticks if horizon.max_ticks is not None else 1 << 62
        if self.max_span is not None and self.max_span < limit:
            limit = self.max_span
        if last < limit:
            limit = last
        if limit <= 0:
            return None
        pool = self.pool
        free = pool.free
        allocs = self._group_allocs
        if allocs(limit) > free:
            limit = longest_fitting(limit, allocs, free)
            if limit <= 0:
                return None
        duration: float | None = None
        if self.timing is not None:
            limit, duration = self._timed_limit(limit, horizon.until_ms, r, self.ctx)
            if limit <= 0:
                return None
        n = limit
        a0 = self.phase[D % self.bs]  # taken by the first step (its record samples the KV after them)
        taken = allocs(n)
        used = pool.usable - free
        if taken:
            self._take(taken)
        # each step's KV after scheduling: used before the span plus the blocks
        # taken so far; counted here as if taken at the start of the step after
        # the span, corrected per block by _sync
        self.kv_weighted += used * n + taken * (D + n)
        self.D = D + n
        self.ctx += r * n
        self.t_steps += n
        self.t_sched_tokens += r * n
        self.tok_hist[r] = self.tok_hist.get(r, 0) + n
        if used + taken > self.kv_peak:
            self.kv_peak = used + taken
        self._span_duration = duration
        self.finish_next = n == last
        if self.steady:
            return span_record(self, n)
        self.steady = True
        decoded_t, sched_json, sj = self._members()
        free0 = free - a0
        body = ((), 0, decoded_t, r, 0, r, 0, (), (), (), sched_json)
        return self._record(self.clock.tick, body, pool.usable - free0, free0, n, duration, sj)

    def _group_step(self) -> TickRecord | None:
        """:meth:`_full_step_fcfs` when every running request is a member: they
        all decode one token (their blocks fit: nobody is preempted), the ones
        at their last token finish, and the waiting queue is served as usual.
        ``None`` when this step's blocks do not fit."""
        running = self.running
        r = len(running)
        cfg = self.cfg
        budget = cfg.max_num_batched_tokens
        if r > budget:
            return None
        pool = self.pool
        D = self.D
        a0 = self.phase[D % self.bs]
        if a0 > pool.free:
            return None
        tick = self.clock.tick
        waiting = self.waiting_fifo
        thr = cfg.long_prefill_token_threshold if r + len(waiting) > 1 else 0
        if a0:
            self._take(a0)
        self.D = D + 1
        context = self.ctx
        self.ctx = context + r
        fin = self.fin
        finished: list[_Req] = []
        while fin and fin[0][0] == D:  # in rseq order: running order
            finished.append(heapq.heappop(fin)[2])
        decoded_t, sched_json, sj = self._members()
        admitted: list[str] = []
        newly: list[_Req] = []  # admitted and finished in this step
        firsts: list[_Req] = []
        total = nsched = decode_tokens = r
        prefill_tokens = admitted_blocks = 0
        if waiting:
            sched_json = list(sched_json)
            sj = list(sj)
            decoded = list(decoded_t)
            budget, total, context, nsched, prefill_tokens, decode_tokens, admitted_blocks = self._admit_fcfs(
                tick, budget - r, thr, total, context, nsched, prefill_tokens, decode_tokens,
                sched_json, sj, decoded, admitted, firsts, newly, [])
            if admitted:
                decoded_t = tuple(decoded)
        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        duration, end_ms = self._step_time(prefill_tokens, decode_tokens, context, firsts, tick)
        leave = False
        if admitted:
            self.members_view = None
            D1 = self.D
            for q in running[r:]:
                q.d0 = D1  # its fields are current
                if q in newly:
                    continue
                if self._plain(q):
                    self._join(q)
                else:
                    leave = True
        completed: list[str] = []
        if finished or newly:
            self.members_view = None
            gone = set(finished)
            gone.update(newly)
            self.running = [q for q in running if q not in gone]
            bs = self.bs
            phase = self.phase
            for q in finished:
                self._sync(q)
                phase[q.ph] -= 1
                phase[q.ph + bs] -= 1
                self.ctx -= q.T
            completed = self._finish(chain(finished, newly), tick, end_ms)
        rejected = tuple(self.rejected_now)
        if rejected:
            self.rejected_now = []
        self.steady = not (admitted or completed or rejected)
        self._count_step(total, kv_after_sched)
        # _sync takes each member block's step (D) off the KV sum, counting it
        # from that step on; its share of this step was counted just above
        self.kv_weighted += a0 * D
        body = (tuple(admitted), prefill_tokens, decoded_t, decode_tokens, len(waiting), r + len(admitted),
                admitted_blocks, tuple(completed), (), rejected, sched_json)
        record = self._record(tick, body, kv_after_sched, free_after_sched, 1, duration, sj)
        if leave:
            self._group_leave()
        return record

    # -- steady decode spans ----------------------------------------------------
    def _steady_span(self, horizon: Horizon) -> int:
        """How many identical decode-only steps follow, and apply them.

        After a decode-only step with no arrival since, the next steps repeat
        it exactly until (a) a request samples its last token, (b) an arrival
        (the horizon), or (c) a block allocation does not fit (that step may
        preempt). The waiting head stays blocked: free blocks only shrink and
        its need only grows. Returns 0 when the next step must run in full.

        One pass over the running requests gathers what the span needs (steps
        to each one's last token, the step of its next block, its context), one
        more applies it: this runs once per record.
        """
        running = self.running
        bs = self.bs
        maxlen = self.maxlen
        limit = horizon.max_ticks if horizon.max_ticks is not None else 1 << 62
        if self.max_span is not None and self.max_span < limit:
            limit = self.max_span
        left_min = (1 << 62) + 1  # tokens until the first request samples its last one
        # first step (0-based) at which each request needs a new block: slot T+k > held*bs
        firsts = []
        context = 0
        for q in running:
            T = q.T
            left = q.M - q.no
            if maxlen is not None and maxlen - T < left:
                left = maxlen - T
            if left < left_min:
                left_min = left
            firsts.append(q.held * bs - T + 1)
            context += T
        last = left_min - 1  # the step sampling the last token is not steady
        if last < limit:
            limit = last
        if limit <= 0:
            return 0
        free = self.pool.free
        # no request takes more than a block per bs steps from its first one:
        # when even that fits, the exact count is not needed
        k_min = min(firsts) if firsts else 0
        if k_min < limit and len(firsts) * ((limit - 1 - k_min) // bs + 1) > free:
            limit = self._fitting_span(limit, firsts, free)
            if limit <= 0:
                return 0
        duration: float | None = None
        if self.timing is not None:
            limit, duration = self._timed_limit(limit, horizon.until_ms, len(running), context)
            if limit <= 0:
                return 0
        self._apply_span(limit, firsts)
        self._span_duration = duration
        # the next step samples somebody's last token: step() goes straight to
        # the finishing step instead of finding a span of 0 (nothing can change
        # in between but an arrival, and an arrival makes the next step full)
        self.finish_next = limit == last
        return limit

    def _fitting_span(self, limit: int, firsts: list[int], free: int) -> int:
        """The longest span up to ``limit`` steps whose block allocations fit in ``free``."""
        bs = self.bs

        def allocs(n: int) -> int:
            total = 0
            for k0 in firsts:
                if n > k0:
                    total += (n - 1 - k0) // bs + 1
            return total

        return longest_fitting(limit, allocs, free)

    def _timed_limit(self, limit: int, until_ms: float | None, r: int, ctx0: int) -> tuple[int, float]:
        """Cut the span so every step starts before the next arrival; also the
        span's duration, summed exactly as the engine would step by step.
        ``r`` requests decode, with ``ctx0`` tokens of context in the first step."""
        timing = self.timing
        assert timing is not None
        now0 = now = self.clock.now_ms
        n = 0
        if type(timing) is TimingModel:
            # TimingModel.step_ms(0, r, ctx), evaluated in the same order: the
            # first three terms do not change inside the span
            base = timing.fixed_ms + timing.per_prefill_token_ms * 0 + timing.per_decode_seq_ms * r
            per_ctx = timing.per_context_token_ms
            # step n's context is ctx0 + n * r: the range yields it, same ints, same sums
            contexts = range(ctx0, ctx0 + limit * r, r) if r else repeat(ctx0, limit)
            if until_ms is None:
                for ctx in contexts:
                    now = now + (base + per_ctx * ctx)
                n = limit
            else:
                for ctx in contexts:
                    if now >= until_ms:
                        break
                    now = now + (base + per_ctx * ctx)
                    n += 1
        else:
            step_ms = timing.step_ms
            while n < limit:
                if until_ms is not None and now >= until_ms:
                    break
                now = now + step_ms(0, r, ctx0 + n * r)
                n += 1
        total = now - now0
        # make the engine's single addition land exactly where step-by-step would
        while now0 + total < now:
            total = _next_up(total)
        while now0 + total > now:
            total = _next_down(total)
        return n, total

    def _apply_span(self, n: int, firsts: list[int]) -> None:
        """Advance every running request ``n`` decode steps, with the blocks they
        take on the way (request ``i`` first needs one at step ``firsts[i]``)."""
        bs = self.bs
        pool = self.pool
        running = self.running
        # Steps before each block's allocation, summed: the span's steps hold
        # that many fewer blocks than its last one (for the KV mean).
        missing = 0
        if self.caching and all([q.npre == 0 and q.ncached >= q.npk for q in running]):
            # Only blocks keyed to their own request get registered in the span
            # (deferred to release, see _cache), so the allocations can be one
            # pop of the free queue, dealt out in running order.
            takers: list[_Req] = []
            grows: list[int] = []
            for q, k0 in zip(running, firsts):
                if n > k0:
                    g = (n - 1 - k0) // bs + 1
                    q.held += g
                    takers.append(q)
                    grows.append(g)
                    missing += g * k0 + bs * g * (g - 1) // 2
                nc = q.nc = q.nc + n
                q.no += n
                q.T += n
                if nc // bs > q.cmark:
                    q.cmark = nc // bs
            if takers:
                got: list[int] = []
                pool.allocate(sum(grows), got)
                if len(takers) == len(got):  # a block each
                    for q, b in zip(takers, got):
                        q.blocks.append(b)
                else:
                    pos = 0
                    for q, g in zip(takers, grows):
                        q.blocks += got[pos:pos + g]
                        pos += g
        else:
            caching = self.caching
            for q, k0 in zip(running, firsts):
                if n > k0:
                    g = (n - 1 - k0) // bs + 1
                    self._grow(q, g)
                    missing += g * k0 + bs * g * (g - 1) // 2
                q.nc += n
                q.no += n
                q.T += n
                if caching:
                    self._cache(q, q.nc // bs)
        used = pool.usable - pool.free
        self.t_steps += n
        r = len(running)
        self.t_sched_tokens += r * n
        self.tok_hist[r] = self.tok_hist.get(r, 0) + n
        # exact per-step KV after schedule(): blocks grow inside the span, the
        # last step holds the most
        if used > self.kv_peak:
            self.kv_peak = used
        self.kv_weighted += used * n - missing

    # -- block helpers ----------------------------------------------------------
    def _grow(self, q: _Req, n: int) -> None:
        q.held += n
        if self.caching:
            self.pool.allocate(n, q.blocks)
        else:
            self.pool.take(n)

    def _cache(self, q: _Req, upto: int) -> None:
        """Register q's full computed blocks [cmark, upto) in the prefix cache.

        Blocks under a prompt key (shareable) are registered now. Blocks keyed to
        the request alone (``(ordinal, i)``: outputs, unshared prompt tail) can
        only be looked up by the request itself after a preemption, so while it
        has never been preempted their registration waits for its release
        (``ncached`` = registered, ``cmark`` = registered as vLLM would have it).
        A resumed request registers them at once: its earlier blocks may still
        sit in the free queue under the same keys, and evictions in between
        must see the same cache as vLLM.
        """
        if upto <= q.cmark:
            return
        q.cmark = upto
        i = q.ncached
        npk = q.npk
        if i < npk:
            shared = npk if npk < upto else upto
            self.pool.insert_run(q.blocks[i:shared], q.pkeys[i:shared])
            q.ncached = i = shared
        if upto > i and q.npre:
            self._register_own(q, upto)

    def _register_own(self, q: _Req, upto: int) -> None:
        """Register blocks [ncached, upto), all beyond the prompt keys."""
        i = q.ncached
        bl = q.blocks[i:upto]
        keys = list(zip(repeat(q.ordinal), range(i, upto)))
        # plain stores: a stale entry of the request's own earlier run is
        # overwritten (the mirror's rule since the first version)
        self.pool.store(bl, keys)
        q.ncached = upto

    def _release(self, q: _Req, finished: bool = False) -> None:
        """Free q's blocks; ``finished``: it will never be scheduled again."""
        if self.caching:
            if finished and not q.npre:
                # Its blocks past the prompt keys were registered only logically
                # (see _cache) under keys nobody else can look up, and it never
                # will again: vLLM frees them as cached blocks, so they go to the
                # cached part of the free queue, but with no key (v1_pool.release).
                nc = q.ncached
                hashed = q.cmark if q.cmark > nc else nc
                keys = q.pkeys[:nc] if nc < q.npk else q.pkeys
                if hashed > nc:
                    keys = keys + [None] * (hashed - nc)
            else:
                if q.cmark > q.ncached:
                    self._register_own(q, q.cmark)
                hashed = q.ncached
                npk = q.npk
                if hashed <= npk:
                    keys = q.pkeys[:hashed]
                else:
                    keys = q.pkeys + list(zip(repeat(q.ordinal), range(npk, hashed)))
            self.pool.release(q.blocks, hashed, keys)
            q.blocks = []
            q.ncached = q.cmark = 0
        else:
            self.pool.give(q.held)
        q.held = 0

    def _preempt(self, q: _Req) -> None:
        self._release(q)
        q.status = PREEMPTED
        q.nc = 0
        q.npre += 1
        if self.priority:
            heapq.heappush(self.waiting_heap, q)
        else:
            self.waiting_fifo.appendleft(q)

    # -- outcomes ---------------------------------------------------------------
    def _reject(self, request: Request, arrival_ms: float | None, reason: str, *, key: str,
                figures: Mapping[str, int]) -> None:
        """``reason`` quotes the request's numbers; ``key`` and ``figures`` are the same
        without them and the numbers themselves (what the report groups by)."""
        self.rejected_now.append(request.id)
        self.steady = False
        self.outcomes.append(RequestOutcome(
            id=request.id, status="rejected", reason=reason, arrival_tick=self.clock.tick,
            finished_tick=self.clock.tick, prompt_tokens=request.prompt_tokens,
            priority=request.priority, tenant=request.tenant, lane=request.lane,
            arrival_ms=arrival_ms, reason_key=key, reason_figures=tuple(figures.items()),
        ))

    def _outcome(self, q: _Req, tick: int, end_ms: float | None) -> RequestOutcome:
        r = q.r
        missed = None
        if r.deadline_tick is not None:
            missed = tick + 1 > r.deadline_tick
        elif r.deadline_ms is not None and end_ms is not None:
            missed = end_ms > r.deadline_ms
        return RequestOutcome(  # positionally: one per request, and keywords cost twice as much
            # id, status, arrival_tick, reason, admitted_tick, first_token_tick, finished_tick,
            r.id, "completed", q.arrival_tick, None, q.admitted_tick, q.first_tick, tick,
            # output_tokens, prompt_tokens, preemptions, prefix_hit_tokens, priority, tenant, lane,
            q.no, r.prompt_tokens, q.npre, q.hit_first, r.priority, r.tenant, r.lane,
            # deadline_missed, arrival_ms, first_token_ms, finished_ms, flags
            missed, q.arrival_ms, q.first_ms, end_ms, _LENGTH_CAPPED if q.no < q.M else (),
        )

    def extra_summary(self) -> Mapping[str, Any]:
        from .v1_summary import summary

        self._group_leave()

        return summary(self)


def _victim_key(q: _Req) -> tuple[int, int]:
    return (q.prio, q.ordinal)


def span_record(s: VllmV1Scheduler, span: int) -> TickRecord:
    """The last decode-only record, repeated ``span`` times from the current tick."""
    last = s.last_record
    if last is None:  # pragma: no cover - steady implies a previous record
        raise PluginError("vllm-v1: steady span without a previous step")
    return tick_record(
        # tick, admitted, prefill_tokens, decoded, decode_tokens, queued, active,
        s.clock.tick, (), 0, last.decoded, last.decode_tokens, last.queued, last.active,
        # kv_pages_used, kv_pages_reserved, completed, preempted, rejected, span, duration_ms, detail
        last.kv_pages_used, 0, (), (), (), span, s._span_duration, last.detail,
    )


def longest_fitting(limit: int, allocs: Callable[[int], int], free: int) -> int:
    """The most steps, up to ``limit``, whose block allocations ``allocs(steps)``
    (non-decreasing, 0 for 0 steps) fit in ``free`` blocks."""
    if allocs(limit) <= free:
        return limit
    lo, hi = 0, limit  # allocs(lo) <= free < allocs(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if allocs(mid) <= free:
            lo = mid
        else:
            hi = mid
    return lo


def _next_up(x: float) -> float:
    import math

    return math.nextafter(x, math.inf)


def _next_down(x: float) -> float:
    import math

    return math.nextafter(x, -math.inf)
