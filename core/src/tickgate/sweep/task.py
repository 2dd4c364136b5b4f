"""A sweep point as plain data and the one function every executor calls on it.

A :class:`Task` is everything one replay needs (the point's policy document as text, how to read its
workload); :func:`run_point` replays it and returns ``("ok", payload)`` or ``("error", one line)``.
An :class:`Executor` runs a batch of tasks and yields ``(point id, result)`` as each finishes
(:mod:`.executor`: where they run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from ..util.errors import InputError, TickgateError, one_line

#: ``("ok", payload)`` or ``("error", one line)``
Result = tuple[str, Any]


@attrs.frozen
class Task:
    """One point to replay, as plain data (pickled to a worker process or a Ray task)."""

    point_id: str
    #: the directory on the caller's machine whose ``points/<id>/policy.json`` holds
    #: ``policy_text`` (errors name files relative to it)
    root: str
    #: the point's policy document as written to ``points/<id>/policy.json``
    policy_text: str
    #: ``path`` (the file), ``label`` (as the sweep names it), ``format``, ``block_size``,
    #: ``limit``, ``sha256`` (of the file's bytes)
    workload: Mapping[str, Any]
    #: per-request limits in ms by metric (``ttft``, ``tpot``, ``e2e``): count the
    #: requests that meet all of them (``tickgate plan --goodput``); None: do not count
    goodput: Mapping[str, float] | None = None
    #: return the report's text (``tickgate sweep`` writes it; ``tickgate plan`` does not)
    keep_report: bool = True


class Executor(Protocol):
    """Runs tasks; a context manager (a pool or a cluster connection lives from
    ``__enter__`` to ``__exit__``, across calls of :meth:`run`)."""

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: Any) -> None: ...

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[str, Result]]:
        """Each task's result as it finishes (any order)."""
        ...


def point_policy(root: Path | str, point_id: str) -> Path:
    return Path(root) / "points" / point_id / "policy.json"


def run_point(
    task: Task, *, worker: bool = False, root: str | None = None, workload_path: str | None = None
) -> Result:
    """Replay one point. ``root``: where its ``points/<id>/policy.json`` is (default
    ``task.root``); ``workload_path``: a copy of the workload to read instead of
    ``task.workload["path"]`` (a Ray node's), named as the original in errors."""
    if worker:
        os.environ["TICKGATE_PARALLEL"] = "0"  # the pool is the parallelism: no helpers per replay
    root = root or task.root
    w = task.workload
    source = workload_path or str(w["path"])
    try:
        from ..host.policy import load_policy
        from ..simulate import replay
        from ..util.atomic import dumps_rows
        from ..workload.sources import open_requests
        from .headline import headline

        policy = load_policy(point_policy(root, task.point_id))
        requests, inputs = open_requests(
            Path(source), w["format"], block_size=w["block_size"], limit=w["limit"]
        )
        inputs["workload"] = w["label"]
        sinks = []
        if task.goodput is not None:
            from .goodput import GoodputSink

            frontend = policy.timing.frontend_ms if policy.timing is not None else 0.0
            sinks.append(GoodputSink(task.goodput, frontend))
        report = replay(requests, policy, inputs=inputs, extra_sinks=sinks)
        if root != task.root:  # the report names the policy file on the caller's machine
            report["inputs"]["policy"] = str(point_policy(task.root, task.point_id))
        payload: dict[str, Any] = {
            "headline": headline(report),
            "latency": report.get("latency"),
            "request_count": report["summary"]["request_count"],
        }
        if sinks:
            payload["goodput"] = sinks[0].counts()
        if task.keep_report:
            payload["report"] = dumps_rows(report) + "\n"
        return "ok", payload
    except InputError as exc:
        path = exc.path
        if path is not None and workload_path is not None and path == workload_path:
            path = str(w["path"])
        elif path is not None:
            path = _relative(path, root)
        exc = InputError(path, exc.message, line=exc.line, column=exc.column, json_path=exc.json_path)
        return "error", one_line(str(exc))
    except TickgateError as exc:
        text = str(exc)
        if workload_path is not None:
            text = text.replace(workload_path, str(w["path"]))
        return "error", one_line(text.replace(str(root).rstrip(os.sep) + os.sep, ""))
    except Exception as exc:  # a bug: recorded, the other points go on
        return "error", one_line(f"internal error: {type(exc).__name__}: {exc}")


def _relative(path: str, root: str) -> str:
    """Files inside the output directory named relative to it: results do not
    depend on where the directory is."""
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return path
