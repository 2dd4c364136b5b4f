"""``--executor ray``: points as Ray tasks, for sweeps and plans that outgrow one
machine (docs/sweep.md, "Ray"). Needs the ``tickgate[ray]`` extra.

The cluster is the one at ``RAY_ADDRESS`` (``ray.init`` reads it), else a local
Ray instance started for the command (``address="local"``: never one that
someone else left running on the machine) on loopback, without the dashboard,
quiet, and shut down at the end.

The workload is shipped once per node, not once per point: its bytes go into
the object store once (``ray.put`` in the command), every task gets the
ObjectRef as an argument, and Ray moves an object to a node the first time a
task there needs it; later tasks on that node read the node's copy. A worker
writes those bytes to a file in the node's temporary directory once
(``tickgate-ray/<sha256>/<name>``, atomically) and reads the requests from it
with the same reader as a local run, so a point replays the same on any node.
Errors that name that copy name the original file instead.

Each task writes its point's policy to a temporary directory of its own (as
``points/<id>/policy.json``, so a refused value is located as with the local
executor) and returns the report to the command, which writes it: a worker on
another node cannot write into the command's output directory.

Every node needs tickgate and the same plugins installed (the same versions:
the points' results, not their code, travel back).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..util.errors import TickgateError, one_line
from .task import Result, Task, point_policy, run_point

MISSING = "--executor ray needs Ray, which is not installed: pip install 'tickgate[ray]'"


def _import_ray() -> Any:
    if not os.environ.get("RAY_ADDRESS"):
        # The instance started for the command is one node that nobody else joins: keep it on
        # loopback (Ray would otherwise swap 127.0.0.1 for the machine's address and listen
        # there). Read when Ray's constants are first imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise TickgateError(MISSING) from None
    return ray


class RayExecutor:
    """Points as Ray tasks, one CPU each. ``jobs``: the CPUs of a local instance
    it starts (default: the machine's); a cluster at ``RAY_ADDRESS`` has its own."""

    def __init__(self, jobs: int | None = None) -> None:
        self.ray = _import_ray()  # before anything is written
        self.jobs = jobs
        self._started = False
        self._shipped: dict[str, Any] = {}
        self._remote: Any = None

    def __enter__(self) -> RayExecutor:
        import logging

        ray = self.ray
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no prompt, no reporting
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        try:
            if os.environ.get("RAY_ADDRESS"):
                ray.init(**quiet)
            else:
                ray.init(address="local", include_dashboard=False, num_cpus=self.jobs, **quiet)
        except Exception as exc:  # an unreachable address, a cluster that would not start
            where = os.environ.get("RAY_ADDRESS") or "a local instance"
            raise TickgateError(
                one_line(
                    f"--executor ray: could not start or reach Ray ({where}): {type(exc).__name__}: {exc}"
                )
            ) from None
        self._started = True
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_ray_point)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._started:
            self._shipped.clear()
            self.ray.shutdown()
            self._started = False

    def _workload(self, task: Task) -> Any:
        """The ObjectRef of the workload's bytes, put into the object store once."""
        sha = task.workload["sha256"]
        ref = self._shipped.get(sha)
        if ref is None:
            ref = self._shipped[sha] = self.ray.put(Path(task.workload["path"]).read_bytes())
        return ref

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[str, Result]]:
        ray = self.ray
        pending = {self._remote.remote(task, self._workload(task)): task.point_id for task in tasks}
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            ref = done[0]
            try:
                result = ray.get(ref)
            except Exception as exc:  # the worker or its node died
                result = ("error", one_line(f"worker failed: {type(exc).__name__}: {exc}"))
            yield pending[ref], tuple(result)


def _ray_point(task: Task, workload: bytes) -> Result:
    """The Ray task: the workload from this node's copy, the policy in a temporary root."""
    copy = _node_copy(task, workload)
    with tempfile.TemporaryDirectory(prefix="tickgate-point-") as root:
        path = point_policy(root, task.point_id)
        path.parent.mkdir(parents=True)
        path.write_text(task.policy_text, encoding="utf-8")
        return run_point(task, worker=True, root=root, workload_path=str(copy))


def _node_copy(task: Task, workload: bytes) -> Path:
    """The workload's bytes as a file on this node, written once (atomically: a
    rename, so concurrent tasks on one node never read half a file)."""
    folder = Path(tempfile.gettempdir()) / "tickgate-ray" / task.workload["sha256"]
    target = folder / Path(task.workload["path"]).name
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".part-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(workload)
        os.replace(tmp, target)
    return target
