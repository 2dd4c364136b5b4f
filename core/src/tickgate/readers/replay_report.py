"""The ``tickgate-replay`` backend mirror: a ``tickgate replay`` report as the
observations of one deployment, so CI can gate a scheduling change (another
policy, another version of a scheduler plugin) before it ships:
``tickgate gate --baseline R1.json --candidate R2.json``.

Both reports replay the same workload, so requests join by their workload id
and ``prompt_identity`` is the prompt length the workload gave. What each
outcome field becomes (docs/formats.md):

* ``status`` other than ``completed`` (a rejection) -> ``error`` (with the reason);
* ``prompt_tokens`` / ``output_tokens`` -> ``tokens_in`` / ``tokens_out``; the
  output's identity is its token count (``output_fingerprint: tokens:N``): a
  scheduler that ends a request early produces another output;
* timed replays (a ``timing`` section): ``ttft_ms = first_token_ms - arrival_ms``,
  ``latency_ms = finished_ms - arrival_ms`` (each plus the timing model's
  ``frontend_ms``, as the report's latencies), ``tpot_ms`` = the mean gap after
  the first token (the report's own TPOT), ``start_ms = arrival_ms``. The
  report's inter-token gaps are run-level (``latency.itl_ms``, an aggregate
  here), so the per-request ``itl_p95_ms`` is absent (decode-token-p95 is not
  evaluated); untimed replays have no milliseconds at all;
* ``tenant`` / ``lane`` -> segments;
* run aggregates from the report: throughput (``output_throughput`` /
  ``request_throughput`` over the client's window, ``duration_s`` that window:
  the figures a benchmark client prints; the engine's busy-time figures only in
  ``extra``, named as such), latency percentiles, peak KV pressure
  (``memory_pressure``), preemptions, prefix-cache hit rate (:func:`prefix_hit_rate`:
  every scheduler's and a fleet's); the trace fingerprint (every scheduling
  decision) is in the provenance.

A report whose ``outcomes`` were cut by ``--detail-limit`` cannot be joined
request by request; that is an error saying how to replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import BackendMirror
from ..util.errors import InputError
from ..util.locations import load_json
from .common import Fields, clean_aggregates, document, head_text, provenance

#: a replay report opens with its summary, whose first field is the request count
_HEAD = '"summary"'
#: the report's distribution fields, named as the observation schema's percentiles are
_PERCENTILES = ("mean", "p50", "p90", "p95", "p99", "max")
_LATENCY = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_ms", "e2e_ms": "latency_ms"}


def looks_like_replay_report(text: str) -> bool:
    return text.startswith("{") and text[1:].lstrip().startswith(_HEAD) and '"trace_fingerprint"' in text


class ReplayReportMirror(BackendMirror):
    name: ClassVar[str] = "tickgate-replay"
    description: ClassVar[str] = (
        "tickgate replay reports (gate one policy or scheduler version against another)"
    )

    def sniff(self, path: Path, head: bytes) -> bool:
        return looks_like_replay_report(head_text(head).lstrip())

    def read(self, path: Path) -> dict[str, Any]:
        report = load_json(path, limit=1024 * 1024 * 1024)
        notes: list[str] = []
        f = Fields(report, path, notes=notes)
        summary = f.sub("summary", required=True)
        assert summary is not None
        fingerprint = summary.string("trace_fingerprint", required=True)
        total = summary.count("request_count", required=True)
        outcomes = f.array("outcomes")
        if outcomes is None:
            raise f.fail("outcomes", "expected the report's request outcomes")
        omitted = f.count("outcomes_omitted") or 0
        if omitted:
            raise InputError(
                path,
                f"lists {len(outcomes)} of {total} request outcomes (the rest were cut by "
                f"--detail-limit), so requests cannot be joined; replay again with "
                f"--detail-limit {total}",
                json_path="$.outcomes_omitted",
            )
        inputs = f.sub("inputs")
        frontend = _frontend_ms(inputs)
        requests = [
            _request(Fields(o, path, prefix=f"$.outcomes[{i}]", notes=notes), frontend)
            for i, o in enumerate(outcomes)
        ]
        timed = any("ttft_ms" in r for r in requests)
        if not timed:
            notes.append(
                "untimed replay: no milliseconds (add a timing section to the policy to gate latency)"
            )
        notes.append(
            "a replay's per-token gaps are run-level only (latency.itl_ms): tpot_ms is each request's "
            "mean gap, itl_p95_ms is absent"
        )
        plugins = f.sub("plugins")
        scheduler = None
        if plugins is not None:
            sched = plugins.sub("scheduler")
            scheduler = sched.string("name") if sched is not None else None
        policy = inputs.string("policy") if inputs is not None else None
        aggregates = clean_aggregates(_aggregates(f, summary, requests))  # before provenance copies the notes
        run = {
            "label": policy,
            "scheduler": scheduler,
            "provenance": provenance(
                path,
                self.name,
                f"report-{fingerprint}",
                notes,
                trace_fingerprint=fingerprint,
                workload=inputs.string("workload") if inputs is not None else None,
                policy=policy,
            ),
            "aggregates": aggregates,
        }
        return document(run, requests)


def _frontend_ms(inputs: Fields | None) -> float:
    """The timing model's way in and out of the engine, which the report's latencies
    include and its outcomes' engine times do not (docs/timing.md)."""
    timing = inputs.obj.get("timing") if inputs is not None else None
    options = timing.get("options") if isinstance(timing, dict) else None
    value = options.get("frontend_ms") if isinstance(options, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _request(o: Fields, frontend_ms: float = 0.0) -> dict[str, Any]:
    rid = o.string("id", required=True)
    status = o.string("status", required=True)
    prompt = o.count("prompt_tokens") or 0
    output = o.count("output_tokens") or 0
    req: dict[str, Any] = {"request_id": rid, "tokens_in": prompt, "prompt_identity": f"tokens:{prompt}"}
    if status != "completed":
        req["error"] = f"{status}: {o.string('reason') or 'no reason given'}"
        return req
    req["error"] = None
    req["tokens_out"] = output
    req["output_fingerprint"] = f"tokens:{output}"
    arrival, first, done = (o.number(k) for k in ("arrival_ms", "first_token_ms", "finished_ms"))
    if arrival is not None:
        req["start_ms"] = arrival
        if first is not None:
            req["ttft_ms"] = round(first - arrival + frontend_ms, 6)
        if done is not None:
            req["latency_ms"] = round(done - arrival + frontend_ms, 6)
            if first is not None and output > 1:
                req["tpot_ms"] = round((done - first) / (output - 1), 6)
    segments = {k: o.string(k) for k in ("tenant", "lane") if o.string(k)}
    if segments:
        req["segments"] = segments
    return req


def _aggregates(f: Fields, summary: Fields, requests: list[dict[str, Any]]) -> dict[str, Any]:
    failed = sum(1 for r in requests if r["error"])
    agg: dict[str, Any] = {
        "request_count": len(requests),
        "completed": len(requests) - failed,
        "failed": failed,
        "total_input_tokens": summary.count("total_prompt_tokens"),
        "total_output_tokens": summary.count("total_decode_tokens"),
    }
    if requests:
        agg["error_rate"] = round(failed / len(requests), 6)
    pressure = summary.number("peak_kv_pressure_pct")
    if pressure is not None:
        agg["memory_pressure"] = round(min(pressure, 100.0) / 100, 6)
    latency = f.sub("latency")
    if latency is not None:
        extra: dict[str, Any] = {"busy_ms": latency.number("busy_ms")}
        if "benchmark_duration_ms" in latency.obj:
            window = latency.number("benchmark_duration_ms")
            agg["duration_s"] = round(window / 1000.0, 6) if window is not None else None
            agg["output_throughput"] = latency.number("output_tokens_per_s")
            agg["request_throughput"] = latency.number("requests_per_s")
            extra["busy_output_tokens_per_s"] = latency.number("busy_output_tokens_per_s")
        elif latency.has("output_tokens_per_s") or latency.has("requests_per_s"):
            # a report from before the client's window: its figures are per busy second,
            # which no client prints, so they are not the run's throughput
            f.notes.append(
                "this report's throughputs are per busy second (written before tickgate reported "
                "them over the client's window): kept as extra.busy_*, not compared as throughput"
            )
            extra["busy_output_tokens_per_s"] = latency.number("output_tokens_per_s")
            extra["busy_requests_per_s"] = latency.number("requests_per_s")
        agg["extra"] = {k: v for k, v in extra.items() if v is not None}
        for key, target in _LATENCY.items():
            dist = latency.sub(key)
            if dist is not None:
                agg[target] = {
                    name: round(v, 6) for name in _PERCENTILES if (v := dist.number(name)) is not None
                }
    scheduler = f.sub("scheduler")
    if scheduler is not None:
        preemptions = scheduler.count("preemptions")
        if preemptions is not None:
            agg["preemptions"] = preemptions
    agg["prefix_cache_hit_rate"] = prefix_hit_rate(f)
    return agg


def prefix_hit_rate(f: Fields) -> float | None:
    """The share of prompt tokens served from the prefix cache, where each kind of
    replay report writes it (None: the report says nothing of a prefix cache):

    * a fleet: ``fleet.prefix_cache_hit_rate`` (hit tokens at first admission / prompt
      tokens, over every engine);
    * vllm-v1: ``scheduler.prefix_cache.hit_rate`` (vLLM's prefix-cache counters,
      hits / queried tokens, as its /metrics has them); a disabled cache: 0;
    * sglang: ``scheduler.prefix_hit_rate`` (radix-cache hits / hits + computed
      prompt tokens; 0 with the radix cache disabled);
    * trtllm: ``scheduler.block_reuse.prefix_hit_rate``; without that block block
      reuse never ran (``enable_block_reuse: false``, or no prefix information in
      the workload): 0;
    * the seed scheduler: ``scheduler.kv_cache.prefix_hit_rate`` with the
      ``prefix-cache`` allocator; the ``paged`` allocator keeps no prefix cache: 0.

    A cache that never served a prefix served none: 0 is the replay's hit rate,
    so a candidate that turns caching off is compared, not "recorded by neither".
    """
    fleet = f.sub("fleet")
    if fleet is not None:
        return fleet.number("prefix_cache_hit_rate")
    scheduler = f.sub("scheduler")
    if scheduler is not None:
        cache = scheduler.sub("prefix_cache")
        if cache is not None:
            return 0.0 if cache.obj.get("enabled") is False else cache.number("hit_rate")
        rate = scheduler.number("prefix_hit_rate")
        if rate is not None:
            return rate
        for block in ("block_reuse", "kv_cache"):
            counters = scheduler.sub(block)
            rate = counters.number("prefix_hit_rate") if counters is not None else None
            if rate is not None:
                return rate
        if scheduler.obj.get("engine") == "trtllm":
            return 0.0
    plugins = f.sub("plugins")
    allocator = plugins.obj.get("kv_allocator") if plugins is not None else None
    if isinstance(allocator, dict) and allocator.get("name") == "paged":
        return 0.0
    return None
