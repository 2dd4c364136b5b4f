"""docs/timing.md's silicon error table is what tools/silicon_table.py makes of docs/data/, and
docs/data/ is what the code predicts today (a sample of rows re-predicted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tickgate.timing.check import check_points
from tickgate.timing.fit import load_timing_file
from tickgate.timing.silicon import read_silicon

REPO = Path(__file__).resolve().parents[1]
SILICON = REPO / "fixtures" / "realdata" / "measured" / "silicon"
DATA = REPO / "docs" / "data"


def test_the_table_in_the_docs_is_generated_from_the_committed_predictions() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO / "tools" / "silicon_table.py"), "--check"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr


def test_the_committed_predictions_are_what_the_code_predicts() -> None:
    rows = read_silicon(SILICON / "silicon_dev.csv", SILICON / "models")
    fitted = load_timing_file(REPO / "policies" / "timing" / "silicon-fitted.yaml").factors_for
    sample = [r for r in rows if r.data["mode"] == "agg"][::97]  # 19 rows across the file
    for run, factors in (("defaults", None), ("fitted", fitted)):
        committed = {
            d["id"]: d for d in map(json.loads, (DATA / f"silicon-{run}.jsonl").read_text().splitlines())
        }
        for result in check_points(sample, factors):
            line = committed[result.point.id]
            if result.predicted is None:
                assert line.get("skipped") == result.skipped
            else:
                assert line["predicted"] == {k: float(f"{v:.6g}") for k, v in result.predicted.items()}, run
