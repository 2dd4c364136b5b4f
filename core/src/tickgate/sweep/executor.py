"""Where points run: the executor interface shared by ``tickgate sweep`` and
``tickgate plan``, the point runner every executor calls, and the local executor.

A :class:`Task` is everything one replay needs as plain data (the point's policy
document as text, how to read its workload); :func:`run_point` replays it and
returns ``("ok", payload)`` or ``("error", one line)``. An executor runs a batch
of tasks and yields ``(point id, result)`` as each finishes; the caller writes
the outputs (on its own machine, which a Ray worker on another node is not) and
puts the results back in point order, so what it writes does not depend on the
executor, the number of workers or the order in which points finished.

Executors:

- :class:`LocalExecutor` (this module): in the command's own process
  (``--jobs 1``) or in a pool of worker processes.
- ``RayExecutor`` (:mod:`.ray_executor`, the ``tickgate[ray]`` extra): Ray tasks
  on a cluster.

Workers are started with "spawn": each one is a fresh interpreter that imports
tickgate and loads the plugins from their entry points, as ``tickgate replay``
would, and inherits nothing from the parent (no registry a caller modified, no
open files, no threads to deadlock a forked child); it also works where fork
does not. The start costs a fraction of a second per worker, not per point (the
pool reuses them, also across the rounds of ``tickgate plan``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..util.errors import one_line
from .task import Executor, Result, Task, run_point

EXECUTORS = ("local", "ray")


def make_executor(name: str, jobs: int | None) -> Executor:
    """The executor ``--executor NAME`` names. Ray is imported here, before anything
    is written: missing, it is one line naming the extra (exit status 2)."""
    if name == "ray":
        from .ray_executor import RayExecutor

        return RayExecutor(jobs)
    return LocalExecutor(jobs or 1)


class LocalExecutor:
    """Points in this process (``jobs`` 1) or in ``jobs`` spawned worker processes."""

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = jobs
        self._pool: Any = None

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[str, Result]]:
        if self.jobs <= 1 or (len(tasks) <= 1 and self._pool is None):
            for task in tasks:
                yield task.point_id, run_point(task)
            return
        import concurrent.futures

        if self._pool is None:
            import multiprocessing

            context = multiprocessing.get_context("spawn")  # why: the module docstring
            self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=self.jobs, mp_context=context)
        futures = {self._pool.submit(run_point, task, worker=True): task.point_id for task in tasks}
        for future in concurrent.futures.as_completed(futures):
            try:
                result = future.result()
            except Exception as exc:  # the worker died (killed, out of memory)
                result = ("error", one_line(f"worker failed: {type(exc).__name__}: {exc}"))
            yield futures[future], result
