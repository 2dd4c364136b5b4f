"""Run a sweep's points (through an executor, :mod:`.executor`), resume, and
write ``results.jsonl``.

Layout of the output directory::

    DIR/results.jsonl                one line per point, in point order
    DIR/points/<id>/policy.json      the point's policy document (loaded as a policy file)
    DIR/points/<id>/report.json      the replay report (atomic)
    DIR/points/<id>/inputs.sha256    the hash of what the report was made from

A point is reused, not replayed, when its ``inputs.sha256`` matches the hash
of its inputs now and its ``report.json`` parses: the report is written before
the hash, so an interrupted point is replayed on the next run. Both are written
here, by the command, as each point's result comes back (a Ray worker may be on
another machine). ``results.jsonl`` is rebuilt from the reports every run, so it
is the same bytes whichever executor, however many workers ran and whichever
points were reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from ..util.atomic import atomic_writer, check_writable
from ..util.errors import TickgateError
from .executor import LocalExecutor
from .headline import headline
from .spec import Point, Sweep, file_sha256
from .task import Executor, Result, Task, point_policy

RESULTS = "results.jsonl"
#: the page ``tickgate sweep`` draws beside the results (docs/html.md)
INDEX = "index.html"


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
    key = {
        "policy": point.document,
        "workload": w.label,
        "workload_sha256": workload_sha256,
        "format": w.format,
        "block_size": w.block_size,
        "limit": w.limit,
    }
    return hashlib.sha256(canonical(key).encode("utf-8")).hexdigest()


def _read_report(path: Path) -> dict[str, Any] | None:
    """The report, or None when it cannot be reused (cut short, not JSON, not a report:
    the point replays and the file is replaced)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        headline(report)
        return report
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _reusable(point_dir: Path, digest: str) -> dict[str, Any] | None:
    try:
        with open(point_dir / "inputs.sha256", "rb") as fh:
            stored = fh.read(len(digest) + 2).decode("ascii").strip()  # a hash, not a whole file
    except (OSError, ValueError):
        return None
    return _read_report(point_dir / "report.json") if stored == digest else None


#: what each file of a point's directory is, for the errors of :func:`check_layout`
POINT_FILES = {
    "policy.json": "the point's policy",
    "report.json": "the point's report",
    "inputs.sha256": "the hash of the point's inputs",
}


def _kind(path: Path) -> str | None:
    """What ``path`` is (symbolic links followed): ``"dir"``, ``"file"``, another kind's name,
    or None when nothing is there."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TickgateError(f"{path}: cannot resume the sweep: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "a named pipe" if stat.S_ISFIFO(mode) else "a device or socket"


def _wrong_kind(path: Path, found: str | None, wanted: str, what: str) -> None:
    if found is None or found == wanted:
        return
    is_ = {"dir": "a directory", "file": "a regular file"}.get(found, found)
    belongs = "a directory" if wanted == "dir" else "a regular file"
    raise TickgateError(
        f"{path}: cannot resume the sweep: it is {is_} where {belongs} ({what}) belongs; "
        "move it away or give another --output"
    )


def check_layout(sweep: Sweep, out_dir: Path) -> None:
    """Before anything is replayed or written: every entry of an existing output directory
    is of the kind a sweep writes there (``points/`` and ``points/<id>/`` directories; the
    point files, ``results.jsonl`` and ``index.html`` regular files), so a re-run into a
    directory whose entries were replaced by something else is one line naming the entry,
    not a failure halfway (a named pipe would even hang the read)."""
    _wrong_kind(out_dir, _kind(out_dir), "dir", "the --output directory")
    if _kind(out_dir) is None:
        return
    for name in (RESULTS, INDEX):
        check_writable(out_dir / name)
    points = out_dir / "points"
    _wrong_kind(points, _kind(points), "dir", "one folder per point")
    if _kind(points) is None:
        return
    for point in sweep.points:
        folder = points / point.id
        found = _kind(folder)
        _wrong_kind(folder, found, "dir", f"point {point.id}'s files")
        if found is None:
            continue
        for name, what in POINT_FILES.items():
            _wrong_kind(folder / name, _kind(folder / name), "file", what)


def run_sweep(
    sweep: Sweep,
    out_dir: Path,
    *,
    jobs: int = 1,
    executor: Executor | None = None,
    on_done: Callable[[str], None] | None = None,
) -> Outcome:
    """Run (or reuse) every point; write ``results.jsonl``; return what happened.
    ``executor``: where points run (default: :class:`LocalExecutor` with ``jobs``)."""
    check_layout(sweep, out_dir)
    hashes = {}
    for point in sweep.points:
        if point.workload.path not in hashes:
            hashes[point.workload.path] = file_sha256(point.workload.path)
    results: dict[str, tuple[str, Any]] = {}
    todo: list[tuple[Task, str]] = []
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
        todo.append((write_task(point, out_dir, hashes[point.workload.path]), digest))
    digests = {task.point_id: digest for task, digest in todo}
    for point_id, (status, value) in _results(executor or LocalExecutor(jobs), [t for t, _ in todo]):
        if status == "ok":
            point_dir = out_dir / "points" / point_id
            with atomic_writer(point_dir / "report.json") as fh:
                fh.write(value["report"])
            with atomic_writer(point_dir / "inputs.sha256") as fh:
                fh.write(digests[point_id] + "\n")
            value = value["headline"]
        results[point_id] = (status, value)
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
    replayed = tuple(t.point_id for t, _ in todo if t.point_id not in failed)
    return Outcome(tuple(rows), replayed, tuple(reused), failed)


def _results(executor: Executor, tasks: list[Task]) -> Iterator[tuple[str, Result]]:
    """The executor's results; with nothing to replay, no pool and no cluster connection."""
    if not tasks:
        return
    with executor as running:
        yield from running.run(tasks)


def write_task(
    point: Point, root: Path, workload_sha256: str, *, goodput: Any = None, keep_report: bool = True
) -> Task:
    """Write the point's ``points/<id>/policy.json`` under ``root``; the task that replays it."""
    text = json.dumps(point.document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    with atomic_writer(point_policy(root, point.id)) as fh:
        fh.write(text)
    w = point.workload
    workload = {
        "path": str(w.path),
        "label": w.label,
        "format": w.format,
        "block_size": w.block_size,
        "limit": w.limit,
        "sha256": workload_sha256,
    }
    return Task(point.id, str(root), text, workload, goodput, keep_report)
