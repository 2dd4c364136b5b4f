"""``tickgate sweep --executor ray`` against a real Ray cluster (issue 23): the 3 x 3 sweep over
the Azure code trace gives the bytes of ``--jobs 1`` and ``--jobs 2``, a failing point is
recorded the same, the workload goes into the object store once, and an interrupted sweep
resumes.

The cluster is the one at ``RAY_ADDRESS``: .ci/run starts one with ``ray start --head`` on
loopback and sets ``TICKGATE_REQUIRE_RAY=1``, which turns the skips below into failures. Without
``RAY_ADDRESS`` the executor starts a local Ray instance of its own, as a user's would.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from sweep_helpers import GRID_3X3, SEQS, interrupt_and_resume, rows, write_sweep

from tickgate.testing import run_cli

REQUIRED = os.environ.get("TICKGATE_REQUIRE_RAY") == "1"

if importlib.util.find_spec("ray") is None:
    if REQUIRED:
        raise RuntimeError("TICKGATE_REQUIRE_RAY=1 but Ray is not installed: pip install './core[ray]'")
    pytest.skip("Ray is not installed (pip install 'tickgate[ray]'); CI installs it and runs these",
                allow_module_level=True)
if REQUIRED and not os.environ.get("RAY_ADDRESS"):
    raise RuntimeError("TICKGATE_REQUIRE_RAY=1 but RAY_ADDRESS is not set: start a cluster (.ci/run does)")


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ray-sweep")
    sweep = write_sweep(root / "in", GRID_3X3)
    outs = {}
    runs = (("jobs1", ["--jobs", "1"]), ("jobs2", ["--jobs", "2"]), ("ray", ["--executor", "ray"]))
    for name, options in runs:
        out = outs[name] = root / name
        result = run_cli("sweep", str(sweep), "--output", str(out), *options)
        assert result.returncode == 0, result.stderr
        assert "9 replayed, 0 reused, 0 failed" in result.stdout
        assert result.stderr == "", result.stderr  # Ray quiet: no logs, no progress off a terminal
    return outs


def test_a_3x3_sweep_on_ray_is_the_bytes_of_one_and_two_jobs(three_ways: dict[str, Path]) -> None:
    one = (three_ways["jobs1"] / "results.jsonl").read_bytes()
    assert (three_ways["jobs2"] / "results.jsonl").read_bytes() == one
    assert (three_ways["ray"] / "results.jsonl").read_bytes() == one
    assert len(rows(three_ways["ray"])) == 9
    for point in ("p0000", "p0004", "p0008"):  # the reports too (they name their output directory)
        ray = (three_ways["ray"] / "points" / point / "report.json").read_text(encoding="utf-8")
        local = (three_ways["jobs1"] / "points" / point / "report.json").read_text(encoding="utf-8")
        assert ray == local.replace(str(three_ways["jobs1"]), str(three_ways["ray"]))


def test_a_rerun_on_ray_reuses_every_point(three_ways: dict[str, Path], tmp_path: Path) -> None:
    sweep = three_ways["ray"].parent / "in" / "sweep.yaml"
    result = run_cli("sweep", str(sweep), "--output", str(three_ways["ray"]), "--executor", "ray")
    assert result.returncode == 0, result.stderr
    assert "0 replayed, 9 reused, 0 failed" in result.stdout


def test_a_failing_point_on_ray_is_recorded_as_locally(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64, 0, 128]\n")
    local = run_cli("sweep", str(sweep), "--output", str(tmp_path / "local"))
    ray = run_cli("sweep", str(sweep), "--output", str(tmp_path / "ray"), "--executor", "ray")
    assert local.returncode == ray.returncode == 1
    assert ray.stderr == local.stderr.replace(str(tmp_path / "local"), str(tmp_path / "ray"))
    results = "results.jsonl"
    assert (tmp_path / "ray" / results).read_bytes() == (tmp_path / "local" / results).read_bytes()
    assert "points/p0001/policy.json:" in rows(tmp_path / "ray")[1]["error"]


def test_the_workload_is_put_into_the_object_store_once(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from tickgate.sweep.ray_executor import RayExecutor
    from tickgate.sweep.run import run_sweep
    from tickgate.sweep.spec import load_sweep

    puts = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(len(value)) or real_put(value, **kw))
    sweep = load_sweep(write_sweep(tmp_path / "in", GRID_3X3))
    outcome = run_sweep(sweep, tmp_path / "out", executor=RayExecutor())
    assert len(outcome.replayed) == 9
    assert puts == [(tmp_path / "in" / "traces" / "azure.csv").stat().st_size]


def test_an_interrupted_ray_sweep_resumes_with_the_points_it_lacks(tmp_path: Path) -> None:
    interrupt_and_resume(tmp_path, ["--executor", "ray"])
