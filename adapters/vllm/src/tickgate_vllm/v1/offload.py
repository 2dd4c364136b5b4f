"""CPU KV offload in the ``vllm-v1`` mirror: the scheduler side of vLLM 0.33's
native ``OffloadingConnector`` (``vllm/distributed/kv_transfer/kv_connector/v1/
offloading/scheduler.py``, ``OffloadingConnectorScheduler``) over the CPU tier
of :mod:`.cpu_tier`, and the reference harness's worker (``FakeOffloadWorker``
in ``drive_vllm.py``: a job is reported done a fixed number of steps after the
step that issued it). The waiting pass that calls it is :mod:`.offload_step`.

What is mirrored (one full-attention KV group, the LRU policy, prompt-only
offloading, asynchronous loads; what vLLM does, by function):

- ``get_num_new_matched_tokens``: beyond the block-aligned GPU hit, the
  leading run of whole chunks cached in the CPU tier, at most ``num_tokens``;
  less than a chunk is no hit; ``None`` (skip the request this step, without
  blocking the queue) while the request has transfer jobs in flight, a hit
  chunk is still being stored, or (GPU prefix caching on) being loaded;
- ``update_state_after_alloc``: one load job for the chunks from the first
  fresh GPU block to the end of the hit; prompt chunks before the hit's end are
  not stored again (``CHUNK_LEVEL``);
- ``build_connector_meta``: the jobs of preempted requests are flushed; store
  jobs, for the scheduled requests in schedule order and then the requests that
  finished in the previous step in ``finished_req_ids``' set order
  (:func:`~.set_order.set_order`), of every full prompt chunk computed by
  the end of the step and not stored yet (``_build_store_jobs``); a store the
  tier cannot make room for is retried the next step; then every finished
  request is signalled to the tier (``on_request_finished``);
- ``update_connector_output``: completed jobs release their chunks (loads) or
  make them readable (stores); an async load's request is promoted the next
  time the waiting pass reaches it.

- the fences of ``request_finished``: a finished request's store still in
  flight is flushed (reported done in this step) once a GPU block it reads from
  is handed to a request again. That needs block identities: with GPU prefix
  caching the pool's block labels are them (a cached block keeps its label
  while free, and a hit or an eviction hands out that label); without it the
  scheduler keeps vLLM's free queue of block ids (:attr:`Offload.gpu_free`,
  freed blocks reused last-freed first).

Not mirrored (docs/vllm.md): sync loads (``sync_load_budget_bytes``), the ARC
policy, sliding-window and hybrid groups, ``offload_prompt_only: false``.

Timed replays: a job also needs its bytes (tokens x the timing model's
``kv_token_bytes``) over ``kv_offload_host_bandwidth_gb_s``; the step counts
are a minimum (and the whole rule when untimed, as in conformance).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from .cpu_tier import CpuTier
from .offload_options import DEFAULT_HOST_BANDWIDTH_GB_S, OFFLOAD_OPTIONS
from .offload_state import Job, OffloadRequest
from .set_order import set_order

if TYPE_CHECKING:  # pragma: no cover
    from .request import RequestState


class Offload:
    """The connector's scheduler side and the fake worker, for one engine."""

    def __init__(
        self, cfg: Any, block_size: int, caching: bool, timing: Any, by_priority: bool, usable_blocks: int
    ) -> None:
        extra = cfg.kv_offload_extra_config or {}
        self.bpc = int(extra.get("blocks_per_chunk", 1))
        self.bs = block_size
        self.tpc = self.bpc * block_size
        self.tier = CpuTier(cfg.kv_offload_cpu_blocks, int(extra.get("store_threshold", 0)))
        self.load_steps = cfg.kv_offload_load_steps
        self.store_steps = cfg.kv_offload_store_steps
        bw = cfg.kv_offload_host_bandwidth_gb_s or DEFAULT_HOST_BANDWIDTH_GB_S
        self.bandwidth_gb_s = float(bw)
        token_bytes = getattr(timing, "kv_token_bytes", None) if timing is not None else None
        #: ms per token moved over the host link (None: step counts only)
        self.ms_per_token = (float(token_bytes) / (self.bandwidth_gb_s * 1e6)) if token_bytes else None
        self.reqs: dict[RequestState, OffloadRequest] = {}
        self.jobs: dict[int, Job] = {}
        self.next_job = 0
        self.being_loaded: set[Hashable] | None = set() if caching else None  # _chunks_being_loaded
        #: kv_holding_waiting: requests that hold KV blocks while waiting (async loads)
        self.holding: Any = [] if by_priority else deque()
        self.recv: set[RequestState] = set()  # finished_recving_kv_req_ids
        self.finished_now: list[
            RequestState
        ] = []  # finished in this step's update (next step's finished_req_ids)
        self.inflight: set[RequestState] = set()  # S._inflight_prefills
        #: requests whose last store found no room in the tier (they retry when next scheduled)
        self.retry: set[RequestState] = set()
        self.batch_loads: list[int] = []
        self.batch_flush: set[int] = set()
        #: GPU blocks handed to requests in this step (_current_batch_allocated_block_ids)
        self.batch_alloc: set[int] = set()
        #: GPU block -> finished requests' store jobs reading it (_block_id_to_pending_jobs)
        self.fences: dict[int, set[int]] = {}
        #: without GPU prefix caching: vLLM's free queue of block ids, a stack (its top is
        #: reused first: the blocks freed last; 1, 2, ... at first, block 0 is the null block)
        self.gpu_free: list[int] | None = None if caching else list(range(usable_blocks, 0, -1))
        self.log: dict[str, list[Any]] = _empty_log()
        # totals (the report's kv_offload section)
        self.lookups = 0
        self.retries = 0  # lookups answered "later"
        self.cpu_hit_tokens = 0  # tokens loaded from the CPU tier (every admission)
        self.first_cpu_hit_tokens = 0  # of them, at requests' first admissions
        self.load_jobs = self.load_chunks = 0
        self.store_jobs = self.store_chunks = 0
        self.store_failures = 0
        self.flushed = 0
        self.waited_requests = 0
        self.wait_steps = 0

    # -- per request ----------------------------------------------------------
    def track(self, q: RequestState, block_keys: list[Hashable]) -> None:
        """``on_new_request``; ``block_keys``: the prompt's shareable block keys."""
        full = q.request.prompt_tokens // self.bs
        keys = list(block_keys[:full]) + [(q.ordinal, i) for i in range(len(block_keys), full)]
        self.reqs[q] = OffloadRequest(q, keys, self.tpc, self.bpc)

    def chunk_keys(self, r: OffloadRequest, start: int, stop: int) -> list[Hashable]:
        bpc = self.bpc
        return r.block_keys[(start + 1) * bpc - 1 : stop * bpc : bpc]  # the last block of each

    def keyed_chunks(self, r: OffloadRequest) -> int:
        """Chunks of the prompt whose block hashes exist (``offload_keys``; with a connector
        vLLM keeps the legacy hashes, so every full prompt block has one from the start)."""
        return len(r.block_keys) // self.bpc

    def quiescent(self) -> bool:
        """Nothing for the connector to do while the running requests only decode and nothing
        waits: no job in flight, no finished request to signal, no store to retry, no request
        waiting for its KV. Then a decode step's ``build_connector_meta`` finds nothing to store
        (every prompt chunk is stored) and its update completes nothing, so the fast paths may
        run the steps (:meth:`sync_blocks` afterwards)."""
        return not self.jobs and not self.finished_now and not self.retry and not self.holding

    def sync_blocks(self, running: list[RequestState]) -> None:
        """After a fast path: the connector's view of the running requests' block tables
        (``_update_req_states`` in each step the path ran)."""
        reqs = self.reqs
        for q in running:
            r = reqs.get(q)
            if r is not None:
                r.nblocks = q.num_blocks

    def busy(self) -> bool:
        """Whether the engine keeps stepping for the connector (``has_pending_push_work``,
        ``has_finished_requests``) or a request waits for its KV."""
        return bool(self.jobs) or bool(self.finished_now) or bool(self.holding)

    # -- admission ------------------------------------------------------------
    def lookup(self, q: RequestState, local: int) -> tuple[int | None, bool]:
        """``get_num_new_matched_tokens``: tokens to load beyond ``local`` (None: ask again
        next step) and whether the load is asynchronous."""
        r = self.reqs[q]
        r.nblocks = 0
        r.next_stored = 0
        self.lookups += 1
        hit = None if r.jobs else self._lookup(r, local)
        if not r.jobs:
            r.local = local
        if hit is None:
            self.retries += 1
        self.log["kv_lookup"].append([q.id, local, -1 if hit is None else hit, int(bool(hit))])
        return hit, bool(hit)

    def _lookup(self, r: OffloadRequest, local: int) -> int | None:
        """``_lookup_complete_chunks`` for one full-attention group."""
        tpc = self.tpc
        nkeys = self.keyed_chunks(r)
        max_hit = min(r.q.num_tokens, nkeys * tpc)
        if max_hit - local < tpc:
            return 0
        start = local // tpc
        stop = min(-(-max_hit // tpc), nkeys)
        hits = 0
        pending = False
        cached = self.tier.chunks
        bk = r.block_keys
        bpc = self.bpc
        for i in range((start + 1) * bpc - 1, stop * bpc, bpc):  # chunk_keys, read until a miss
            chunk = cached.get(bk[i])
            if chunk is None:
                break
            hits += 1
            pending = pending or chunk[0] < 0
        if pending:
            return None
        if hits == 0:
            return 0
        max_hit = min(max_hit, tpc * (start + hits))
        new = max_hit - local
        if new < tpc:
            return 0
        if self.being_loaded and not self.being_loaded.isdisjoint(
            self.chunk_keys(r, start, -(-(local + new) // tpc))
        ):
            return None
        return new

    def after_alloc(self, q: RequestState, ext: int, step: int, now_ms: float | None) -> None:
        """``update_state_after_alloc`` with ``ext`` > 0 tokens to load: the load job."""
        r = self.reqs[q]
        self.batch_alloc.update(q.blocks)
        self.log["kv_admit"].append([q.id, ext])
        bs = self.bs
        cached = r.local + ext
        first = r.local // bs  # the first fresh GPU block (the local hit is block-aligned)
        gpu_blocks = -(-cached // bs) - first
        num_chunks = -(-cached // self.tpc)
        keys = self.chunk_keys(r, first // self.bpc, num_chunks)
        r.next_stored = num_chunks
        ids = self.tier.prepare_load(keys, r.ctx)
        job = self._job(r, keys, False, step + self.load_steps, now_ms, len(keys))
        self.batch_loads.append(job.id)
        if self.being_loaded is not None:
            self.being_loaded.update(keys)
        self.load_jobs += 1
        self.load_chunks += len(keys)
        self.cpu_hit_tokens += ext
        if not r.waited:
            r.waited = True
            self.waited_requests += 1
        # the GPU blocks loaded into: vLLM's ids when the scheduler keeps them, else their count
        dst: Any = q.blocks[first : first + gpu_blocks] if self.gpu_free is not None else gpu_blocks
        self.log["kv_load"].append([q.id, job.id, 0, dst, ids])

    def _job(
        self,
        r: OffloadRequest,
        keys: list[Hashable],
        store: bool,
        due: int,
        now_ms: float | None,
        chunks: int,
    ) -> Job:
        jid = self.next_job
        self.next_job += 1
        due_ms = float("-inf")
        if self.ms_per_token is not None and now_ms is not None:
            due_ms = now_ms + chunks * self.tpc * self.ms_per_token
        job = Job(jid, r, keys, store, due, due_ms)
        self.jobs[jid] = job
        r.jobs.add(jid)
        return job

    def reserved_blocks(self, spec_tokens: int, maxlen: int | None) -> int:
        """``S._inflight_prefill_reserved_blocks``: blocks the in-flight prefills still need
        for their whole sequence (``spec_tokens``: 1 + K + lookahead with drafts)."""
        bs = self.bs
        total = 0
        for q in self.inflight:
            full = q.num_tokens if maxlen is None else min(q.num_tokens, maxlen)
            need = -(-(full + spec_tokens) // bs) - q.num_blocks
            if need > 0:
                total += need
        return total

    # -- end of schedule(): build_connector_meta --------------------------------
    def build_meta(
        self,
        sched: Mapping[RequestState, list[Any]],
        preempted: list[RequestState],
        step: int,
        now_ms: float | None,
    ) -> None:
        """Flushes, store jobs and finished requests of this step; ``sched`` maps each
        scheduled request to its entry (tokens first, computed before third)."""
        reqs = self.reqs
        alloc = self.batch_alloc
        for q in sched:
            r = reqs.get(q)
            if r is not None:
                alloc.update(q.blocks[r.nblocks :])  # the whole table for a new admission (nblocks 0)
                r.nblocks = q.num_blocks
        loads = set(self.batch_loads)
        for q in preempted:
            r = reqs.get(q)
            if r is not None and r.jobs:
                self.batch_flush.update(r.jobs - loads)
        fences = self.fences
        if fences and not alloc.isdisjoint(fences):
            for b in alloc:
                fenced = fences.get(b)
                if fenced:
                    self.batch_flush.update(fenced)
        finished = self._finished_order()
        for q, entry in sched.items():
            self._store(reqs.get(q), entry[2] + entry[0], False, step, now_ms)
        for q in finished:
            self._store(reqs.get(q), 0, True, step, now_ms)
        for q in finished:
            r = reqs.get(q)
            if r is None:
                continue
            r.signaled = True
            self.retry.discard(q)
            self.tier.request_finished(r.ctx)
            if not r.jobs:
                del reqs[q]
        jobs = self.jobs
        for jid in self.batch_flush:
            job = jobs.get(jid)
            if job is not None:
                job.due = step
                job.due_ms = float("-inf")
        self.flushed += len(self.batch_flush)
        self.log["kv_flush"] = sorted(self.batch_flush)
        self.batch_flush = set()
        self.batch_loads = []
        self.batch_alloc = set()

    def _finished_order(self) -> list[RequestState]:
        """Last step's finished requests in the order vLLM walks ``finished_req_ids`` (a set)."""
        done = self.finished_now
        self.finished_now = []
        if len(done) < 2:
            return done
        by_id = {str(q.id): q for q in done}
        return [by_id[i] for i in set_order(str(q.id) for q in done)]

    def _store(
        self, r: OffloadRequest | None, after: int, finished: bool, step: int, now_ms: float | None
    ) -> None:
        """``_build_store_jobs`` for one request: its full prompt chunks computed by the end of
        the step (``after`` tokens; finished: all of them) and not stored yet."""
        if r is None or r.next_stored >= len(r.block_keys) // self.bpc:
            return  # every keyed chunk stored (decodes): nothing to store
        q = r.q
        prompt = q.request.prompt_tokens
        T = q.num_tokens
        tokens = max(prompt, T - 1) if finished else after
        offloadable = min(tokens, T, prompt)
        num_chunks = min(offloadable // self.tpc, r.nblocks // self.bpc, self.keyed_chunks(r))
        start = r.next_stored
        if num_chunks <= start:
            return
        keys = self.chunk_keys(r, start, num_chunks)
        out = self.tier.prepare_store(keys, r.ctx)
        if out is None:
            self.store_failures += 1
            self.retry.add(q)
            return  # retried the next time the request is scheduled (or finishes)
        self.retry.discard(q)
        to_store, ids = out
        r.next_stored = num_chunks
        if not to_store:
            return
        job = self._job(r, to_store, True, step + self.store_steps, now_ms, len(to_store))
        stored = set(to_store)
        bpc = self.bpc
        blocks = r.final_blocks if finished else q.blocks
        job.blocks = [
            b
            for c, k in zip(range(start, num_chunks), keys)
            if k in stored
            for b in blocks[c * bpc : (c + 1) * bpc]
        ]
        if finished:  # fenced at once, and flushed if a block of it was handed out this step
            self._fence(job)
            if not self.batch_alloc.isdisjoint(job.blocks):
                self.batch_flush.add(job.id)
        self.store_jobs += 1
        self.store_chunks += len(to_store)
        src: Any = job.blocks if self.gpu_free is not None else len(job.blocks)
        self.log["kv_store"].append([q.id, job.id, src, ids])

    def _fence(self, job: Job) -> None:
        fences = self.fences
        for b in job.blocks:
            fences.setdefault(b, set()).add(job.id)

    def request_finished(self, q: RequestState) -> None:
        """``_free_request`` -> ``request_finished``, before ``q``'s blocks are freed: its
        stores in flight are fenced by their blocks; it is signalled at the next build."""
        self.finished_now.append(q)
        self.inflight.discard(q)
        r = self.reqs.get(q)
        if r is None:
            return
        r.finished = True
        r.final_blocks = list(q.blocks)
        for jid in r.jobs:
            job = self.jobs[jid]
            if job.store:
                self._fence(job)

    # -- update_from_output ----------------------------------------------------
    def collect(self, step: int, end_ms: float | None) -> None:
        """The worker's report for this step: the jobs due by now, completed in id order."""
        jobs = self.jobs
        now = float("inf") if end_ms is None else end_ms
        done = sorted(j.id for j in jobs.values() if j.due <= step and j.due_ms <= now)
        tier = self.tier
        for jid in done:
            job = jobs.pop(jid)
            r = job.req
            if job.store:
                tier.complete_store(job.keys)
            else:
                tier.complete_load(job.keys)
                if self.being_loaded:
                    self.being_loaded.difference_update(job.keys)
                self.recv.add(r.q)
            r.jobs.discard(jid)
            if r.finished and job.store:  # _remove_pending_job
                fences = self.fences
                for b in job.blocks:
                    held = fences.get(b)
                    if held is not None:
                        held.discard(jid)
                        if not held:
                            del fences[b]
            if r.signaled and not r.jobs:
                self.reqs.pop(r.q, None)
        self.log["kv_done"] = done

    def next_due_ms(self) -> float | None:
        """When the next transfer limited by bandwidth ends (timed replays' idle steps)."""
        times = [j.due_ms for j in self.jobs.values() if j.due_ms != float("-inf")]
        return min(times) if times else None

    def take_log(self) -> dict[str, list[Any]]:
        log = self.log
        self.log = _empty_log()
        return log

    def summary(self, total_prompt_tokens: int, gpu_hit_tokens: int) -> dict[str, Any]:
        tier = self.tier
        return {
            "cpu_chunks": tier.num_chunks,
            "blocks_per_chunk": self.bpc,
            "tokens_per_chunk": self.tpc,
            "store_threshold": tier.store_threshold,
            "load_steps": self.load_steps,
            "store_steps": self.store_steps,
            "host_bandwidth_gb_s": self.bandwidth_gb_s if self.ms_per_token is not None else None,
            "lookups": self.lookups,
            "lookups_retried": self.retries,
            "hit_tokens_by_tier": {"gpu": gpu_hit_tokens, "cpu": self.first_cpu_hit_tokens},
            "hit_rate_by_tier": {
                "gpu": round(gpu_hit_tokens / total_prompt_tokens, 6) if total_prompt_tokens else 0.0,
                "cpu": round(self.first_cpu_hit_tokens / total_prompt_tokens, 6)
                if total_prompt_tokens
                else 0.0,
            },
            "loaded_tokens": self.cpu_hit_tokens,
            "load_jobs": self.load_jobs,
            "loaded_chunks": self.load_chunks,
            "store_jobs": self.store_jobs,
            "stored_chunks": self.store_chunks,
            "stored_tokens": self.store_chunks * self.tpc,
            "store_failures": self.store_failures,
            "stores_below_threshold": tier.skipped_stores,
            "cpu_evictions": tier.evictions,
            "cpu_chunks_used": tier.used_chunks(),
            "requests_waited_for_kv": self.waited_requests,
            "steps_waiting_for_kv": self.wait_steps,
            "jobs_flushed": self.flushed,
        }


def _empty_log() -> dict[str, list[Any]]:
    return {"kv_lookup": [], "kv_admit": [], "kv_load": [], "kv_store": [], "kv_flush": [], "kv_done": []}


__all__ = ["OFFLOAD_OPTIONS", "Offload", "OffloadRequest"]
