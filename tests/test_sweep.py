"""``tickgate sweep`` (issue 23, first slice): sweep files with located errors, a 3 x 3
grid over a real Azure trace, results.jsonl the same bytes for any --jobs and any
PYTHONHASHSEED, resume by inputs hash, failing points recorded and the others run."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, POLICIES, TOYS
from sweep_helpers import GRID_3X3, SEQS, TOKENS, TRACE, rows, write_sweep

from tickgate.testing import run_cli


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The 3 x 3 sweep run with --jobs 1 and --jobs 2 (into two directories)."""
    root = tmp_path_factory.mktemp("sweep")
    sweep = write_sweep(root / "in", GRID_3X3)
    one, two = root / "one", root / "two"
    for out, jobs in ((one, "1"), (two, "2")):
        result = run_cli("sweep", str(sweep), "--output", str(out), "--jobs", jobs)
        assert result.returncode == 0, result.stderr
        assert "9 replayed, 0 reused, 0 failed" in result.stdout
        assert result.stderr == ""  # not a terminal: no progress
    return sweep, one, two


def test_a_3x3_sweep_has_one_line_per_point_in_grid_order(swept: tuple[Path, Path, Path]) -> None:
    _, one, _ = swept
    found = rows(one)
    assert [r["id"] for r in found] == [f"p{i:04d}" for i in range(9)]
    assert [(r["params"][SEQS], r["params"][TOKENS]) for r in found] == [
        (s, t) for s in (16, 64, 128) for t in (1024, 2048, 4096)]
    for row in found:
        assert row["workload"] == "traces/azure.csv"
        assert set(row["metrics"]) == {"completed", "rejected", "total_ticks", "ttft_ms_p50", "ttft_ms_p99",
                                       "itl_ms_p50", "itl_ms_p99", "e2e_ms_p99", "output_tokens_per_s",
                                       "requests_per_s"}
        assert row["metrics"]["completed"] + row["metrics"]["rejected"] == 300
        report = json.loads((one / "points" / row["id"] / "report.json").read_text(encoding="utf-8"))
        assert report["summary"]["trace_fingerprint"] == row["fingerprint"]
        assert report["summary"]["total_ticks"] == row["metrics"]["total_ticks"]
        policy = json.loads((one / "points" / row["id"] / "policy.json").read_text(encoding="utf-8"))
        assert policy["scheduler"]["options"]["max_num_seqs"] == row["params"][SEQS]
        assert policy["scheduler"]["options"]["max_num_batched_tokens"] == row["params"][TOKENS]
    line = (one / "results.jsonl").read_text(encoding="utf-8").splitlines()[0]
    assert line == json.dumps(json.loads(line), sort_keys=True)
    # the knobs matter: 16 seqs and a 1024-token budget do not replay like 128 and 4096
    assert found[0]["fingerprint"] != found[8]["fingerprint"]


def test_a_point_replays_as_tickgate_replay_would(swept: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sweep, one, _ = swept
    point = one / "points" / "p0004"  # 64 seqs, 2048 tokens: the bundled preset itself
    result = run_cli("replay", "--input", str(TRACE), "--input-format", "azure", "--limit", "300",
                     "--policy", str(TOYS / "vllm-v1-toy.yaml"), "--output", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stderr
    direct = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert rows(one)[4]["fingerprint"] == direct["summary"]["trace_fingerprint"]
    assert json.loads((point / "report.json").read_text(encoding="utf-8"))["summary"] == direct["summary"]


def test_results_are_the_same_bytes_with_one_and_two_jobs(swept: tuple[Path, Path, Path]) -> None:
    _, one, two = swept
    assert (one / "results.jsonl").read_bytes() == (two / "results.jsonl").read_bytes()


def test_results_are_the_same_bytes_under_another_hash_seed(swept: tuple[Path, Path, Path],
                                                            tmp_path: Path) -> None:
    sweep, one, _ = swept
    for seed in ("0", "12345"):
        out = tmp_path / seed
        result = run_cli("sweep", str(sweep), "--output", str(out), "--jobs", "2",
                         env={"PYTHONHASHSEED": seed})
        assert result.returncode == 0, result.stderr
        assert (out / "results.jsonl").read_bytes() == (one / "results.jsonl").read_bytes()


def test_a_rerun_replays_only_the_points_whose_report_is_missing(swept: tuple[Path, Path, Path],
                                                                 tmp_path: Path) -> None:
    sweep, one, _ = swept
    out = tmp_path / "out"
    shutil.copytree(one, out)
    expected = (out / "results.jsonl").read_bytes()
    (out / "points" / "p0005" / "report.json").unlink()
    (out / "points" / "p0007" / "report.json").write_text('{"summary": ', encoding="utf-8")  # cut short
    before = {p.name: (p / "report.json").stat().st_mtime_ns
              for p in (out / "points").iterdir() if (p / "report.json").exists()}
    result = run_cli("sweep", str(sweep), "--output", str(out), "--jobs", "2")
    assert result.returncode == 0, result.stderr
    assert "2 replayed, 7 reused, 0 failed" in result.stdout
    assert (out / "results.jsonl").read_bytes() == expected
    for name, mtime in before.items():
        if name != "p0007":
            assert (out / "points" / name / "report.json").stat().st_mtime_ns == mtime, name
    assert (out / "points" / "p0005" / "report.json").is_file()


def test_a_changed_input_replays_its_points_again(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64]\n")
    out = tmp_path / "out"
    assert run_cli("sweep", str(sweep), "--output", str(out)).returncode == 0
    again = run_cli("sweep", str(sweep), "--output", str(out))
    assert "0 replayed, 1 reused" in again.stdout
    trace = tmp_path / "in" / "traces" / "azure.csv"
    trace.write_bytes(trace.read_bytes() + b"\n")  # same requests, other bytes: the hash decides
    third = run_cli("sweep", str(sweep), "--output", str(out))
    assert third.returncode == 0, third.stderr
    assert "1 replayed, 0 reused" in third.stdout


def test_a_failing_point_is_recorded_and_the_others_run(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64, 0, 128]\n")
    out = tmp_path / "out"
    result = run_cli("sweep", str(sweep), "--output", str(out), "--jobs", "2")
    assert result.returncode == 1
    assert "2 replayed, 0 reused, 1 failed" in result.stdout
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: 1 of 3 sweep points failed (first: p0001: ")
    found = rows(out)
    assert [("error" in r) for r in found] == [False, True, False]
    failed = found[1]
    assert set(failed) == {"id", "workload", "params", "error"}
    assert failed["params"] == {SEQS: 0}
    # located in the generated policy file, named relative to the output directory
    policy = out / "points" / "p0001" / "policy.json"
    line = next(i for i, text in enumerate(policy.read_text(encoding="utf-8").splitlines(), 1)
                if '"max_num_seqs"' in text)
    assert failed["error"].startswith(f"points/p0001/policy.json:{line}:")
    assert "$.scheduler.options.max_num_seqs: 0 is less than the minimum of 1" in failed["error"]
    assert not (out / "points" / "p0001" / "report.json").exists()
    # a re-run tries the failed point again and reuses the others
    again = run_cli("sweep", str(sweep), "--output", str(out))
    assert again.returncode == 1
    assert "0 replayed, 2 reused, 1 failed" in again.stdout


def test_zip_lists_vary_together_after_the_grid(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [32, 64]\n",
                        f"zip:\n  {TOKENS}: [1024, 4096]\n  scheduler.options.num_gpu_blocks: [1024, 4096]\n")
    out = tmp_path / "out"
    result = run_cli("sweep", str(sweep), "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert [(r["params"][SEQS], r["params"][TOKENS], r["params"]["scheduler.options.num_gpu_blocks"])
            for r in rows(out)] == [(32, 1024, 1024), (32, 4096, 4096), (64, 1024, 1024), (64, 4096, 4096)]


def located(result: object) -> str:
    assert result.returncode == 2, result.stderr  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(("grid", "extra", "where", "message"), [
    (f"  {SEQS}: [64]\n  scheduler.options.max_num_seq: [1, 2]\n", "",
     ":7:3: $.grid.scheduler.options.max_num_seq: ", "scheduler.options.max_num_seq is not in the policy"),
    (f"  {SEQS}: [64]\n", f"zip:\n  {TOKENS}: [1024, 2048]\n  scheduler.options.num_gpu_blocks: [1024]\n",
     ":9:3: $.zip.scheduler.options.num_gpu_blocks: ", "zip lists must have the same length"),
    (f"  {SEQS}: [64]\n", "repeats: 3\n",
     ":7:1: $.repeats: ", "unknown key 'repeats'"),
    (f"  {SEQS}: 64\n", "",
     ":6:3: $.grid.scheduler.options.max_num_seqs: ", "64 is not of type 'array'"),
    (f"  timing.options.fixed_ms.x: [1]\n", "",
     ":6:3: $.grid.timing.options.fixed_ms.x: ", "(timing.options.fixed_ms has: a float, not a mapping)"),
])
def test_a_bad_sweep_file_is_one_located_line_and_writes_nothing(tmp_path: Path, grid: str, extra: str,
                                                                 where: str, message: str) -> None:
    sweep = write_sweep(tmp_path / "in", grid, extra)
    out = tmp_path / "out"
    line = located(run_cli("sweep", str(sweep), "--output", str(out)))
    assert line.startswith(f"error: {sweep}{where}"), line
    assert message in line
    assert not out.exists()


def test_a_missing_workload_and_an_unknown_format_are_located(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64]\n")
    text = sweep.read_text(encoding="utf-8")
    sweep.write_text(text.replace("traces/azure.csv", "traces/nope.csv"), encoding="utf-8")
    line = located(run_cli("sweep", str(sweep), "--output", str(tmp_path / "out")))
    assert line.startswith(f"error: {sweep}:4:") and "$.workloads[0].path: workload " in line
    sweep.write_text(text.replace("format: azure", "format: azur"), encoding="utf-8")
    line = located(run_cli("sweep", str(sweep), "--output", str(tmp_path / "out")))
    assert f"{sweep}:4:" in line and "$.workloads[0].format: unknown format 'azur'" in line
    assert not (tmp_path / "out").exists()


def test_a_bad_base_policy_is_located_in_the_policy(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64]\n")
    base = tmp_path / "in" / "base.yaml"
    base.write_text(base.read_text(encoding="utf-8").replace("max_num_seqs: 64", "max_num_seqs: -1"),
                    encoding="utf-8")
    line = located(run_cli("sweep", str(sweep), "--output", str(tmp_path / "out")))
    number = base.read_text(encoding="utf-8").splitlines().index("    max_num_seqs: -1") + 1
    assert line.startswith(f"error: {base}:{number}:") and "$.scheduler.options.max_num_seqs" in line


def test_the_example_sweep_file_expands_to_its_nine_points() -> None:
    from tickgate.sweep.spec import load_sweep

    sweep = load_sweep(FIXTURES / "sweeps" / "vllm-azure.yaml")
    assert [p.id for p in sweep.points] == [f"p{i:04d}" for i in range(9)]
    assert sweep.points[4].params == {SEQS: 64, TOKENS: 2048}
    assert sweep.points[4].workload.format == "azure" and sweep.points[4].workload.limit == 300
    assert sweep.points[0].document["scheduler"]["options"]["max_num_seqs"] == 16


def test_progress_counts_points_on_a_terminal_only(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tickgate.commands.cli import main

    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [32, 64]\n")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["sweep", str(sweep), "--output", str(tmp_path / "tty")]) == 0
    out, err = capsys.readouterr()
    assert "sweep: " in err and "\r" in err
    assert "2 replayed" in out and err not in out
    piped = run_cli("sweep", str(sweep), "--output", str(tmp_path / "pipe"))
    assert piped.stderr == ""
    results = "results.jsonl"
    assert (tmp_path / "pipe" / results).read_bytes() == (tmp_path / "tty" / results).read_bytes()


def test_an_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64]\n")
    (tmp_path / "out").write_text("x", encoding="utf-8")
    line = located(run_cli("sweep", str(sweep), "--output", str(tmp_path / "out")))
    assert line == f"error: {tmp_path / 'out'}: --output must be a directory"


def test_workloads_are_the_outer_loop_and_an_untimed_replay_has_no_latencies(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    workload = FIXTURES / "workload.json"
    sweep.write_text(f"policy: {POLICIES / 'default.yaml'}\n"
                     f"workloads:\n  - {workload}\n  - {{path: {workload}, limit: 2}}\n"
                     "grid:\n  scheduler.options.kv_pages: [20, 40]\n", encoding="utf-8")
    result = run_cli("sweep", str(sweep), "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    found = rows(tmp_path / "out")
    pages = "scheduler.options.kv_pages"
    assert [(r["id"], r["params"][pages], r["metrics"]["completed"]) for r in found] == [
        ("p0000", 20, 4), ("p0001", 40, 4), ("p0002", 20, 2), ("p0003", 40, 2)]
    assert set(found[0]["metrics"]) == {"completed", "rejected", "total_ticks"}


def test_the_ray_executor_without_ray_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """Whether or not Ray is installed here: a ``ray`` package that cannot be imported
    stands in front of it on the path."""
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("No module named \'ray\'")\n', encoding="utf-8")
    sweep = write_sweep(tmp_path / "in", f"  {SEQS}: [64]\n")
    out = tmp_path / "out"
    line = located(run_cli("sweep", str(sweep), "--output", str(out), "--executor", "ray",
                           env={"PYTHONPATH": str(tmp_path / "shim")}))
    assert line == "error: --executor ray needs Ray, which is not installed: pip install 'tickgate[ray]'"
    assert not out.exists()


def test_an_interrupted_sweep_resumes_with_the_points_it_lacks(tmp_path: Path) -> None:
    from sweep_helpers import interrupt_and_resume

    interrupt_and_resume(tmp_path, ["--jobs", "2"])
