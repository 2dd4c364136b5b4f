"""``tickgate timing fit RUN... --deployment D.yaml`` (docs/timing.md, "Fitting to your own runs") on the
real client files (fixtures/realdata/clients): a mock server with TTFT 40 + 0.05 x prompt ms and an ITL of
15 ms (baseline) or 18 ms (candidate_slow), SOURCES.txt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from tickgate.commands.cli import main

CLIENTS = FIXTURES / "realdata" / "clients"
DEPLOYMENT = FIXTURES / "calibrate" / "mock-server.yaml"
BASELINE = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
SLOW = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_candidate_slow.json"
HELD = CLIENTS / "aiperf_0.13" / "aiperf_chat_baseline" / "profile_export.jsonl"


def fit(out: Path, *args: str) -> int:
    return main(["timing", "fit", *args, "--output", str(out)])


def checked(run: Path, timing: Path | None, out: Path) -> dict[str, dict[str, float]]:
    """``timing check``'s summary of ``run`` under the deployment (its timing replaced by ``timing``)."""
    extra = ["--timing", str(timing)] if timing is not None else []
    code = main(["timing", "check", str(run), "--deployment", str(DEPLOYMENT), *extra, "--output", str(out)])
    assert code == 0
    summary = json.loads(out.read_text())["summary"]
    return {
        k: {"measured": v["measured"]["mean"], "predicted": v["predicted"]["mean"]}
        for k, v in summary.items()
    }


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The baseline and the slow candidate, each fitted once (the baseline with the aiperf run held out)."""
    tmp = tmp_path_factory.mktemp("fit")
    out = {"baseline": tmp / "baseline.yaml", "slow": tmp / "slow.yaml"}
    assert fit(out["baseline"], str(BASELINE), "--deployment", str(DEPLOYMENT), "--holdout", str(HELD)) == 0
    assert fit(out["slow"], str(SLOW), "--deployment", str(DEPLOYMENT)) == 0
    return out


def test_a_fit_on_the_baseline_predicts_a_held_out_run_of_another_client_within_10_percent(
    fitted: dict[str, Path], tmp_path: Path
) -> None:
    means = checked(HELD, fitted["baseline"], tmp_path / "check.json")
    for metric in ("ttft_ms", "itl_ms"):
        m, p = means[metric]["measured"], means[metric]["predicted"]
        assert abs(p - m) / m < 0.10, (metric, m, p)
    # and the fit moved the deployment's first guess towards the run (in sample, mean ITL)
    before = checked(BASELINE, None, tmp_path / "before.json")["itl_ms"]
    after = checked(BASELINE, fitted["baseline"], tmp_path / "after.json")["itl_ms"]
    assert abs(after["predicted"] - after["measured"]) < abs(before["predicted"] - before["measured"])


def test_the_fitted_file_reports_in_sample_and_held_out_error_and_the_factors_ranges(
    fitted: dict[str, Path],
) -> None:
    text = fitted["baseline"].read_text()
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert any(c.startswith("# in-sample, 200 requests: TTFT MdAPE") and "ITL MdAPE" in c for c in comments)
    assert any(c.startswith(f"# held out {HELD}, 80 requests: TTFT MdAPE") for c in comments)
    for factor in (
        "fixed_ms",
        "per_prefill_token_ms",
        "per_decode_seq_ms",
        "per_context_token_ms",
        "frontend_ms",
    ):
        line = next(c for c in comments if c.startswith(f"#   {factor}: "))
        value, low, high = (
            float(x)
            for x in line.split(": ")[1].replace("(", "").replace("..", "").replace(";", "").split()[:3]
        )
        assert low <= value <= high or low == high == value, line
    # the aiperf run's prompts (85 .. 178 tokens) go beyond the vllm-bench run's (128 .. 130): said, not silent
    assert any("prompt tokens" in c and "extrapolates" in c for c in comments)


def test_the_slow_candidate_fits_an_itl_about_20_percent_higher(
    fitted: dict[str, Path], tmp_path: Path
) -> None:
    base = checked(BASELINE, fitted["baseline"], tmp_path / "b.json")
    slow = checked(BASELINE, fitted["slow"], tmp_path / "s.json")
    ratio = slow["itl_ms"]["predicted"] / base["itl_ms"]["predicted"]
    assert 1.15 < ratio < 1.25, ratio  # the server's 18 vs 15 ms
    # TTFT is the same on both servers: the fits agree on it within 5 %
    assert abs(slow["ttft_ms"]["predicted"] / base["ttft_ms"]["predicted"] - 1) < 0.05


def test_the_fit_is_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    outs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"fit{seed}.yaml"
        result = run_cli(
            "timing", "fit", str(BASELINE), "--deployment", str(DEPLOYMENT), "--output", str(out),
            env={"PYTHONHASHSEED": seed},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_a_deployment_not_timed_by_linear_is_located(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = DEPLOYMENT.read_text().replace("  name: linear", "  name: roofline")
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(text)
    line = text.splitlines().index("  name: roofline") + 1
    out = tmp_path / "fit.yaml"
    assert fit(out, str(BASELINE), "--deployment", str(deployment)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {deployment}:{line}") and "'linear'" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("where", ["run", "holdout"])
def test_a_missing_or_foreign_run_is_named_and_nothing_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    bad = tmp_path / "missing.json"
    out = tmp_path / "fit.yaml"
    args = [str(bad), "--deployment", str(DEPLOYMENT)] if where == "run" else [
        str(BASELINE), "--deployment", str(DEPLOYMENT), "--holdout", str(bad)
    ]  # fmt: skip
    assert fit(out, *args) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "file not found" in err and len(err.splitlines()) == 1
    assert not out.exists()
    foreign = tmp_path / "points.jsonl"
    foreign.write_text('{"id": "x"}\n')
    args = [str(foreign) if a == str(bad) else a for a in args]
    assert fit(out, *args) == 2
    err = capsys.readouterr().err.strip()
    assert str(foreign) in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_roofline_options_are_refused_with_a_deployment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "fit.yaml"
    assert fit(out, str(BASELINE), "--deployment", str(DEPLOYMENT), "--every", "2") == 2
    assert "--every" in capsys.readouterr().err
    assert fit(out, str(BASELINE), "--holdout", str(HELD)) == 2
    assert "--deployment" in capsys.readouterr().err
    assert not out.exists()
