"""``tickgate plan --executor ray`` (issue 23): the same PLAN.json bytes as ``--jobs 1``, on the
Ray cluster at ``RAY_ADDRESS`` (.ci/run starts one and sets ``TICKGATE_REQUIRE_RAY=1``, which
turns the skip into a failure) or a local instance the executor starts."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from conftest import POLICIES
from sweep_helpers import SEQS, TRACE

from tickgate.testing import run_cli

if importlib.util.find_spec("ray") is None:
    if os.environ.get("TICKGATE_REQUIRE_RAY") == "1":
        raise RuntimeError("TICKGATE_REQUIRE_RAY=1 but Ray is not installed: pip install './core[ray]'")
    pytest.skip("Ray is not installed (pip install 'tickgate[ray]'); CI installs it and runs this",
                allow_module_level=True)


def test_a_plan_on_ray_is_the_bytes_of_one_job(tmp_path: Path) -> None:
    outs = []
    for name, options in (("one", ["--jobs", "1"]), ("ray", ["--executor", "ray"])):
        out = tmp_path / f"{name}.json"
        result = run_cli("plan", "--workload", str(TRACE), "--input-format", "azure", "--limit", "300",
                         "--policy", str(POLICIES / "vllm-v1-bench.yaml"), "--slo", "ttft_p99_ms=1000",
                         "--slo", "e2e_p99_ms=20000", "--goodput", "0.9", "--vary", f"{SEQS}=12..27",
                         "--vary", "scheduler.options.max_num_batched_tokens=1024,2048", "--output", str(out),
                         *options)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
