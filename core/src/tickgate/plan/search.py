"""Which configurations ``tickgate plan`` replays, and which one it recommends.

The list values of ``--vary`` are enumerated (their cartesian product, in the
order given: a *combination*). A range ``LO..HI`` is taken to be monotone, more
never worse (replicas, KV blocks, a batch limit), and is searched for each
combination by bisection: HI first (if even HI misses, no value of the range
meets the SLOs), then the lower half of what is left until the smallest value
that meets them is found. That takes 1 + ceil(log2(HI - LO + 1)) replays
instead of HI - LO + 1, and when the smallest meeting value v is above LO, v - 1
was replayed and missed: the evidence shows both sides of the line.

Replays go in *rounds*: each round takes the next value of every combination
still searching and runs them together (``--jobs``, Ray); the evidence lists
them in round order, combinations in their order within a round. What runs and
in what order depends only on the replays' results, never on which finished
first, so PLAN.json is the same bytes with any executor and any ``--jobs``.

The recommendation is the meeting configuration of least cost (``--cost gpus``: GPUs,
:func:`tickgate.cost.shape.gpus`; ``--cost usd``: dollars per hour, :mod:`.pricing`); of
equal costs, the first combination in enumeration order and, within a range, its smallest
meeting value.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..cost.prices import PriceTable
from ..sweep.run import write_task
from ..sweep.spec import Point, Workload, set_path
from ..sweep.task import Executor
from .pricing import entry_cost, sort_key
from .spec import Slo, Vary


@attrs.frozen
class Question:
    base: Mapping[str, Any]
    workload: Workload
    workload_sha256: str
    slos: tuple[Slo, ...]
    varies: tuple[Vary, ...]
    #: --goodput G and the per-request limits it counts against (None without it)
    goodput: float | None = None
    goodput_limits: Mapping[str, float] | None = None
    #: what is minimised: ``gpus`` or ``usd`` (per hour, with ``prices``)
    cost: str = "gpus"
    prices: PriceTable | None = None


@attrs.define
class _Search:
    """One combination of the list values, and its range's bisection state."""

    combo: dict[str, Any]
    lo: int = 0
    hi: int = 0
    #: the smallest value known to meet (its evidence entry), or the combination's entry
    best: dict[str, Any] | None = None
    done: bool = False
    probe: int | None = None


Entry = dict[str, Any]


def search(
    question: Question, executor: Executor, root: Path, on_run: Callable[[Entry], None] | None = None
) -> tuple[Entry | None, list[Entry]]:
    """Replay what the search needs; return (recommendation or None, evidence)."""
    lists = [v for v in question.varies if v.kind == "list"]
    ranged = next((v for v in question.varies if v.kind == "range"), None)
    searches = []
    for values in itertools.product(*(v.values for v in lists)):
        s = _Search(dict(zip((v.path for v in lists), values)))
        if ranged is not None:
            s.lo, s.hi = ranged.values
        searches.append(s)
    evidence: list[dict[str, Any]] = []
    while True:
        batch = [s for s in searches if not s.done]
        if not batch:
            break
        points: list[Point] = []
        for s in batch:
            params = dict(s.combo)
            if ranged is not None:
                s.probe = s.hi if s.best is None else (s.lo + _value(s.best, ranged) - 1) // 2
                params[ranged.path] = s.probe
            ordered = {v.path: params[v.path] for v in question.varies}
            points.append(_point(question, len(evidence) + len(points) + 1, ordered))
        tasks = [
            write_task(p, root, question.workload_sha256, goodput=question.goodput_limits, keep_report=False)
            for p in points
        ]
        results = dict(executor.run(tasks))
        for s, point in zip(batch, points):
            entry = judge(question, len(evidence) + 1, point, results[point.id])
            evidence.append(entry)
            if on_run:
                on_run(entry)
            _advance(s, entry, ranged)
    return _recommend(searches, question), evidence


def _advance(s: _Search, entry: dict[str, Any], ranged: Vary | None) -> None:
    if ranged is None:
        s.best = entry if entry["met"] else None
        s.done = True
        return
    assert s.probe is not None
    if entry["met"]:
        s.best = entry
    elif s.best is None:  # HI itself misses: nothing in the range meets
        s.done = True
        return
    else:
        s.lo = s.probe + 1
    if s.lo > _value(s.best, ranged) - 1:
        s.done = True


def _value(entry: dict[str, Any], ranged: Vary) -> int:
    return int(entry["values"][ranged.path])


def _point(question: Question, run: int, params: dict[str, Any]) -> Point:
    document = copy.deepcopy(dict(question.base))
    for key, value in params.items():
        set_path(document, key, copy.deepcopy(value))
    return Point(f"r{run:04d}", question.workload, params, document)


def judge(question: Question, run: int, point: Point, result: tuple[str, Any]) -> Entry:
    """One evidence entry: the values, the cost, each SLO's figure and margin, met or not."""
    status, payload = result
    latency = payload["latency"] if status == "ok" else None
    cost = entry_cost(point.document, question.prices, latency)
    entry: dict[str, Any] = {"run": run, "values": dict(point.params), "cost": cost}
    if status != "ok":
        entry.update(met=False, error=payload)
        return entry
    metrics = payload["headline"]["metrics"]
    figures: dict[str, Any] = {}
    for slo in question.slos:
        measured = slo.measure(latency)
        met = measured is not None and measured <= slo.limit
        margin = None if measured is None else round(slo.limit - measured, 3)
        figures[slo.name] = {"limit": slo.limit, "measured": measured, "margin": margin, "met": met}
    if question.goodput is not None:
        counts = payload["goodput"]
        share = round(counts["good"] / counts["requests"], 6) if counts["requests"] else 0.0
        figures["goodput"] = {
            "limit": question.goodput,
            "measured": share,
            "margin": round(share - question.goodput, 6),
            "met": share >= question.goodput,
            "requests": counts["requests"],
            "good": counts["good"],
        }
    met = all(f["met"] for f in figures.values())
    if question.goodput is None and metrics["rejected"]:
        met = False  # latencies are over completed requests: rejecting some must not look fast
    entry.update(
        met=met,
        slos=figures,
        completed=metrics["completed"],
        rejected=metrics["rejected"],
        fingerprint=payload["headline"]["fingerprint"],
    )
    return entry


def _recommend(searches: Sequence[_Search], question: Question) -> dict[str, Any] | None:
    best: dict[str, Any] | None = None
    key = sort_key(question.cost)
    for s in searches:
        if s.best is not None and (best is None or s.best["cost"][key] < best["cost"][key]):
            best = s.best
    if best is None:
        return None
    return {"values": dict(best["values"]), "cost": dict(best["cost"]), "run": best["run"]}
