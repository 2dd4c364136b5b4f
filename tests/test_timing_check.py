"""``tickgate timing check`` and ``fit`` on the published measurements (realdata/measured)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest

from tickgate.testing import run_cli
from tickgate.timing.points import read_points, setup_point

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "fixtures" / "realdata" / "measured"
POINTS = MEASURED / "points.jsonl"
CLIENTS = REPO / "fixtures" / "realdata" / "clients"

#: what the shipped defaults reach on the 40 points (docs/timing.md's table); a
#: change that makes them worse fails here
DEFAULT_MEDIAN_APE = 0.075
DEFAULT_WITHIN_1_5X = 0.95
#: the same with the factors fitted on them (policies/timing/roofline-fitted.yaml)
FITTED_MEDIAN_APE = 0.07
FITTED_WITHIN_1_5X = 0.96
FITTED = REPO / "policies" / "timing" / "roofline-fitted.yaml"


@pytest.fixture(scope="module")
def default_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("check") / "P.jsonl"
    res = run_cli("timing", "check", str(POINTS), "--output", str(out))
    assert res.returncode == 0, res.stderr
    return out, res.stdout


def test_the_check_predicts_every_measured_key_of_every_replayable_point(default_check: tuple[Path, str]) -> None:
    out, stdout = default_check
    points = {p.id: p for p in read_points(POINTS)}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 32  # the 8 ShareGPT points are skipped
    for line in lines:
        assert sorted(line["predicted"]) == sorted(points[line["id"]].measured)
        assert all(v > 0 for v in line["predicted"].values())
    skipped = [line for line in stdout.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 8 and all("does not ship" in line for line in skipped)


def summary_of(predictions: Path) -> dict[str, float]:
    """Median |error| and the share within 1.5x of a check's output, recomputed here."""
    measured = {p.id: p.measured for p in read_points(POINTS)}
    errors = [(v - measured[line["id"]][k]) / measured[line["id"]][k]
              for line in map(json.loads, predictions.read_text().splitlines())
              for k, v in line["predicted"].items()]
    ratios = [1 + e for e in errors]
    return {"values": len(errors), "median_ape": median(abs(e) for e in errors),
            "within_1_5x": sum(1 for q in ratios if max(q, 1 / q) <= 1.5) / len(errors)}


def test_the_medians_stay_where_docs_timing_says(default_check: tuple[Path, str]) -> None:
    out, stdout = default_check
    assert stdout.splitlines()[-1].startswith("total: 103 values from 32 points (8 skipped)")
    s = summary_of(out)
    assert s["values"] == 103
    assert s["median_ape"] <= DEFAULT_MEDIAN_APE, s
    assert s["within_1_5x"] >= DEFAULT_WITHIN_1_5X, s


def test_the_shipped_fit_does_better_than_the_defaults(tmp_path: Path) -> None:
    out = tmp_path / "P.jsonl"
    res = run_cli("timing", "check", str(POINTS), "--timing", str(FITTED), "--output", str(out))
    assert res.returncode == 0, res.stderr
    s = summary_of(out)
    assert s["median_ape"] <= FITTED_MEDIAN_APE and s["within_1_5x"] >= FITTED_WITHIN_1_5X, s
    # the file says what it reached, and the check prints the same
    assert f"# after: {res.stdout.splitlines()[-1].split(': ', 1)[1]}" in FITTED.read_text()


def test_the_shipped_fit_is_what_the_fit_finds() -> None:
    """vLLM's family (one point, quick): the search from the defaults lands on the shipped factors."""
    from tickgate.timing.fit import fit_family, load_timing_file
    from tickgate.timing.roofline import ENGINE_DEFAULTS

    base = load_timing_file(REPO / "policies" / "timing" / "roofline-base.yaml")
    found, before, after = fit_family(read_points(POINTS), "vllm", {**ENGINE_DEFAULTS["vllm"],
                                                                     **base.factors_for("vllm")})
    assert after < before
    assert found == load_timing_file(FITTED).fitted["vllm"]


def test_the_sglang_workloads_reproduce_the_recorded_token_totals() -> None:
    """bench_serving's random dataset with its seed: the same lengths, to the token."""
    for point in read_points(POINTS):
        w = point.data["workload"]
        if "total_input_tokens" not in w or "random_range_ratio" not in w:
            continue
        setup = setup_point(point)
        assert sum(r.prompt_tokens for r in setup.requests) == w["total_input_tokens"], point.id
        outputs = sum(r.max_output_tokens for r in setup.requests)
        zeros = outputs - w["total_output_tokens"]  # drawn 0-token outputs decode one token here
        assert 0 <= zeros <= 10, point.id


def test_fit_improves_and_writes_the_same_bytes_twice(tmp_path: Path) -> None:
    points = [line for line in POINTS.read_text().splitlines() if '"trt05' in line or '"trt050' in line]
    subset = tmp_path / "points.jsonl"
    subset.write_text("\n".join(points) + "\n")
    base = tmp_path / "base.yaml"
    base.write_text("timing:\n  name: roofline\n  options: {}\n")
    outs = []
    for n, seed in enumerate(("1", "2")):
        out = tmp_path / f"fitted{n}.yaml"
        res = run_cli("timing", "fit", str(subset), "--base", str(base), "--output", str(out), "--rounds", "12",
                      "--passes", "2", env={"PYTHONHASHSEED": seed})
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
        before, after = res.stdout.splitlines()
    assert outs[0] == outs[1]

    def median(line: str) -> float:
        return float(line.split("median |error| ")[1].split(" %")[0])

    assert median(after) < median(before) / 2
    res = run_cli("timing", "check", str(subset), "--timing", str(tmp_path / "fitted0.yaml"),
                  "--output", str(tmp_path / "p.jsonl"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1].endswith(after.split(": ", 1)[1])


def test_a_benchmark_run_is_replayed_with_the_base_policy(tmp_path: Path) -> None:
    base = tmp_path / "policy.yaml"
    base.write_text("version: 1\nscheduler:\n  name: vllm-v1\n  options: {block_size: 16, num_gpu_blocks: 20000, "
                    "max_num_seqs: 256, max_num_batched_tokens: 8192}\ntiming:\n  name: roofline\n"
                    "  options: {model: llama-3.1-8b, gpu: H100-SXM-80GB}\n")
    run = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
    out = tmp_path / "fitted.yaml"
    res = run_cli("timing", "fit", str(run), "--base", str(base), "--output", str(out), "--rounds", "4",
                  "--passes", "1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("before: 15 values from 1 point")
    fitted = out.read_text()
    assert "fitted:\n  vllm:\n" in fitted and "model: \"llama-3.1-8b\"" in fitted


def test_a_benchmark_run_needs_a_policy_base(tmp_path: Path) -> None:
    base = tmp_path / "timing.yaml"
    base.write_text("timing:\n  name: roofline\n  options: {}\n")
    run = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
    res = run_cli("timing", "fit", str(run), "--base", str(base), "--output", str(tmp_path / "f.yaml"))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {base}: $.scheduler: a benchmark run")
    assert len(res.stderr.splitlines()) == 1 and not (tmp_path / "f.yaml").exists()


def test_iteration_statistics_are_priced_step_by_step(tmp_path: Path) -> None:
    """Executor API iteration stats (the real record's layout, with latencies and batches set)."""
    real = json.loads((REPO / "fixtures" / "realdata" / "trtllm" / "iteration_stats_executor_api_2025-04.json")
                      .read_text())[0]
    rows = []
    for n, (ctx, nctx, gen, ms) in enumerate([(2048, 1, 0, 60.0), (0, 0, 16, 9.0), (512, 1, 15, 24.0)]):
        row = json.loads(json.dumps(real))
        row["iter"], row["iterLatencyMS"] = n + 1, ms
        row["inflightBatchingStats"].update(numCtxTokens=ctx, numContextRequests=nctx, numGenRequests=gen)
        rows.append(json.dumps(row))
    log = tmp_path / "iterations.jsonl"
    log.write_text("\n".join(rows) + "\n")
    base = tmp_path / "timing.yaml"
    base.write_text("timing:\n  name: roofline\n  options: {model: llama-3.1-8b, gpu: H100-SXM-80GB, engine: trtllm}\n")
    res = run_cli("timing", "fit", str(log), "--base", str(base), "--output", str(tmp_path / "f.yaml"),
                  "--rounds", "20", "--passes", "1")
    assert res.returncode == 0, res.stderr
    before, after = res.stdout.splitlines()
    assert before.startswith("before: 3 values from 1 point")
    assert float(after.split("median |error| ")[1].split(" %")[0]) < float(
        before.split("median |error| ")[1].split(" %")[0])
    # the real record alone: its one iteration has no latency yet
    only = tmp_path / "real.json"
    only.write_text(json.dumps([real]))
    res = run_cli("timing", "fit", str(only), "--base", str(base), "--output", str(tmp_path / "g.yaml"))
    assert res.returncode == 2 and "no iteration with an iterLatencyMS above 0" in res.stderr


@pytest.mark.parametrize("text, message", [
    ('{"id": "x", "workload": {}, "measured": {}}\nnot json\n', ":2:1: invalid JSON: Expecting value"),
    ('{"id": "x", "workload": [], "measured": {}}\n', ":1: $.workload: expected an object at 'workload'"),
])
def test_bad_points_are_located(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "points.jsonl"
    path.write_text(text)
    res = run_cli("timing", "check", str(path), "--output", str(tmp_path / "p.jsonl"))
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.splitlines()) == 1
    assert not (tmp_path / "p.jsonl").exists()


def test_a_timing_file_for_another_model_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("timing:\n  name: linear\n  options: {}\n")
    res = run_cli("timing", "check", str(POINTS), "--timing", str(bad), "--output", str(tmp_path / "p.jsonl"))
    assert res.returncode == 2
    assert res.stderr.strip() == (f"error: {bad}:2:3: $.timing.name: timing fit and check work on the roofline "
                                  "model, not 'linear'")
