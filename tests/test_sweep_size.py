"""A sweep grid is counted before it is expanded (issue 32): a 10^9-point product is one located
line naming its shape, exit 2, at once, not an internal error after the product
was built."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import FIXTURES, run_cli

SWEEP = FIXTURES / "sweeps" / "vllm-azure.yaml"


def _sweep(tmp_path: Path, grid_lines: list[str]) -> Path:
    text = SWEEP.read_text()
    head = text.split("grid:\n", 1)[0].replace("../../policies/", str(FIXTURES.parent / "policies") + "/")
    head = head.replace("../realdata/", str(FIXTURES / "realdata") + "/")
    path = tmp_path / "big.yaml"
    path.write_text(head + "grid:\n" + "".join(f"  {line}\n" for line in grid_lines))
    return path


def test_a_billion_point_grid_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    values = "[" + ", ".join(str(v) for v in range(1, 1001)) + "]"
    path = _sweep(tmp_path, [f"scheduler.options.max_num_seqs: {values}",
                             f"scheduler.options.max_num_batched_tokens: {values}",
                             f"scheduler.options.block_size: {values}"])
    start = time.monotonic()
    res = run_cli("sweep", str(path), "--output", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (
        f"error: {path}:8:1: $.grid: the sweep has 1,000,000,000 points (1 workloads x 1000 "
        "scheduler.options.max_num_seqs x 1000 scheduler.options.max_num_batched_tokens x 1000 "
        "scheduler.options.block_size); one sweep runs at most 100,000: split it into several, or give fewer values"
    )
    assert time.monotonic() - start < 60
    assert not (tmp_path / "out").exists()


def test_a_grid_at_the_limit_is_not_refused_for_its_size(tmp_path: Path) -> None:
    from tickgate.sweep.spec import MAX_POINTS, load_sweep

    side = int(MAX_POINTS**0.5)
    values = "[" + ", ".join(str(v) for v in range(1, side + 1)) + "]"
    path = _sweep(tmp_path, [f"scheduler.options.max_num_seqs: {values}",
                             f"scheduler.options.max_num_batched_tokens: {values}"])
    assert len(load_sweep(path).points) == side * side <= MAX_POINTS
