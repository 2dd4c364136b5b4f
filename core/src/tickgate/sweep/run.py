"""Run a sweep's points (in-process or in worker processes), resume, and write
``results.jsonl``.

Layout of the output directory::

    DIR/results.jsonl                one line per point, in point order
    DIR/points/<id>/policy.json      the point's policy document (loaded as a policy file)
    DIR/points/<id>/report.json      the replay report (atomic)
    DIR/points/<id>/inputs.sha256    the hash of what the report was made from

A point is reused, not replayed, when its ``inputs.sha256`` matches the hash
of its inputs now and its ``report.json`` parses: the report is written before
the hash, so an interrupted point is replayed on the next run. ``results.jsonl``
is rebuilt from the reports every run, so it is the same bytes however many
workers ran and whichever points were reused.

Workers are started with "spawn": each one is a fresh interpreter that imports
tickgate and loads the plugins from their entry points, as ``tickgate replay``
would, and inherits nothing from the parent (no registry a caller modified, no
open files, no threads to deadlock a forked child); it also works where fork
does not. The start costs a fraction of a second per worker, not per point (the
pool reuses them).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

import attrs

from ..atomic import atomic_writer, write_json
from ..errors import InputError, TickgateError, one_line
from .spec import Point, Sweep, file_sha256

RESULTS = "results.jsonl"


@attrs.frozen
class Outcome:
    rows: tuple[dict[str, Any], ...]
    replayed: tuple[str, ...]
    reused: tuple[str, ...]
    failed: tuple[str, ...]


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def inputs_hash(point: Point, workload_sha256: str) -> str:
    """What a point's report depends on: its policy document and its workload
    (as named in the sweep file, its bytes, and how it is read)."""
    w = point.workload
    key = {"policy": point.document, "workload": w.label, "workload_sha256": workload_sha256,
           "format": w.format, "block_size": w.block_size, "limit": w.limit}
    return hashlib.sha256(canonical(key).encode("utf-8")).hexdigest()


def metrics(report: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of a replay report (latencies only when it was timed)."""
    summary = report["summary"]
    requests = report["requests"]
    out: dict[str, Any] = {"completed": requests["completed"], "rejected": requests["rejected"],
                           "total_ticks": summary["total_ticks"]}
    latency = report.get("latency")
    if isinstance(latency, dict) and latency.get("ttft_ms"):
        for name, quantiles in (("ttft_ms", ("p50", "p99")), ("itl_ms", ("p50", "p99")),
                                ("e2e_ms", ("p99",))):
            block = latency.get(name) or {}
            for q in quantiles:
                if q in block:
                    out[f"{name}_{q}"] = block[q]
        if "output_tokens_per_s" in latency:
            out["output_tokens_per_s"] = latency["output_tokens_per_s"]
    return out


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """A point's fields of ``results.jsonl`` from its report."""
    return {"fingerprint": report["summary"]["trace_fingerprint"], "metrics": metrics(report)}


def _read_report(path: Path) -> dict[str, Any] | None:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        headline(report)
        return report  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _reusable(point_dir: Path, digest: str) -> dict[str, Any] | None:
    try:
        stored = (point_dir / "inputs.sha256").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return _read_report(point_dir / "report.json") if stored == digest else None


def run_point(point_id: str, out_dir: str, workload: dict[str, Any], digest: str,
              worker: bool = False) -> tuple[str, Any]:
    """Replay one point: ``("ok", headline)`` or ``("error", one line)``. Runs in a
    worker process (plain arguments and results) or in-process."""
    if worker:
        os.environ["TICKGATE_PARALLEL"] = "0"  # the pool is the parallelism: no helpers per replay
    point_dir = Path(out_dir) / "points" / point_id
    try:
        from ..policy import load_policy
        from ..replay import replay
        from ..replay.sources import open_requests

        policy = load_policy(point_dir / "policy.json")
        requests, inputs = open_requests(Path(workload["path"]), workload["format"],
                                         block_size=workload["block_size"], limit=workload["limit"])
        inputs["workload"] = workload["label"]
        report = replay(requests, policy, inputs=inputs)
        write_json(point_dir / "report.json", report)
        with atomic_writer(point_dir / "inputs.sha256") as fh:
            fh.write(digest + "\n")
        return "ok", headline(report)
    except InputError as exc:
        if exc.path is not None:
            exc = InputError(_relative(exc.path, out_dir), exc.message, line=exc.line, column=exc.column,
                             json_path=exc.json_path)
        return "error", one_line(str(exc))
    except TickgateError as exc:
        return "error", one_line(str(exc).replace(out_dir.rstrip(os.sep) + os.sep, ""))
    except Exception as exc:  # a bug: recorded, the other points go on
        return "error", one_line(f"internal error: {type(exc).__name__}: {exc}")


def _relative(path: str, out_dir: str) -> str:
    """Files inside the output directory named relative to it: results do not
    depend on where the directory is."""
    try:
        return str(Path(path).resolve().relative_to(Path(out_dir).resolve()))
    except ValueError:
        return path


def run_sweep(sweep: Sweep, out_dir: Path, *, jobs: int = 1,
              on_done: Callable[[str], None] | None = None) -> Outcome:
    """Run (or reuse) every point; write ``results.jsonl``; return what happened."""
    hashes = {}
    for point in sweep.points:
        if point.workload.path not in hashes:
            hashes[point.workload.path] = file_sha256(point.workload.path)
    results: dict[str, tuple[str, Any]] = {}
    todo: list[tuple[Point, str]] = []
    reused = []
    for point in sweep.points:
        point_dir = out_dir / "points" / point.id
        digest = inputs_hash(point, hashes[point.workload.path])
        report = _reusable(point_dir, digest)
        if report is not None:
            results[point.id] = ("ok", headline(report))
            reused.append(point.id)
            if on_done:
                on_done(point.id)
            continue
        # a failure must not leave an old report looking current
        for stale in ("inputs.sha256", "report.json"):
            (point_dir / stale).unlink(missing_ok=True)
        text = json.dumps(point.document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        with atomic_writer(point_dir / "policy.json") as fh:
            fh.write(text)
        todo.append((point, digest))

    def args(point: Point, digest: str) -> tuple[Any, ...]:
        w = point.workload
        return (point.id, str(out_dir), {"path": str(w.path), "label": w.label, "format": w.format,
                                         "block_size": w.block_size, "limit": w.limit}, digest)

    if jobs <= 1 or len(todo) <= 1:
        for point, digest in todo:
            results[point.id] = run_point(*args(point, digest))
            if on_done:
                on_done(point.id)
    else:
        import concurrent.futures
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # why: the module docstring
        workers = min(jobs, len(todo))
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(run_point, *args(point, digest), True): point.id for point, digest in todo}
            for future in concurrent.futures.as_completed(futures):
                point_id = futures[future]
                try:
                    results[point_id] = future.result()
                except Exception as exc:  # the worker died (killed, out of memory)
                    results[point_id] = ("error", one_line(f"worker failed: {type(exc).__name__}: {exc}"))
                if on_done:
                    on_done(point_id)
    rows = []
    for point in sweep.points:
        status, value = results[point.id]
        row: dict[str, Any] = {"id": point.id, "workload": point.workload.label, "params": dict(point.params)}
        if status == "ok":
            row.update(value)
        else:
            row["error"] = value
        rows.append(row)
    with atomic_writer(out_dir / RESULTS) as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")
    failed = tuple(r["id"] for r in rows if "error" in r)
    replayed = tuple(p.id for p, _ in todo if p.id not in failed)
    return Outcome(tuple(rows), replayed, tuple(reused), failed)
