"""``timing check`` and ``timing fit`` name the user's file and place (issue 32). A point is
replayed with a policy tickgate writes to a temporary file: a value of the point that policy
refuses was named by that file, deleted by then; a malformed point named the base file; a
benchmark run's base policy was checked only when replayed. Now each error names the points
file, the line and the point's JSON path (or the base file and its line), exit 2, every point
is set up before the first replay, and an output already there is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from tickgate.timing import check
from tickgate.timing.points import read_points
from tickgate.util.errors import InputError

GOOD = {"id": "good", "engine": "vllm", "model_key": "llama-3.1-8b", "gpu_key": "H100-SXM-80GB", "tp": 1,
        "workload": {"isl": 128, "osl": 16, "num_requests": 10, "request_rate": 5},
        "measured": {"ttft_ms_mean": 12.5}}
RUN = FIXTURES / "realdata" / "clients" / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"
ROOFLINE_BASE = FIXTURES.parent / "policies" / "timing" / "roofline-base.yaml"


def _point(**change: object) -> str:
    return json.dumps({**GOOD, "id": "bad", **change})


def _points(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "points.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


CASES = [
    (_point(engine_flags={"gpu_memory_utilization": 5}),
     "$.engine_flags.gpu_memory_utilization: 5.0 is greater than the maximum of 1"),
    (_point(engine_flags={"max_model_len": -1}), "$.engine_flags.max_model_len: -1 is less than the minimum of 1"),
    (_point(engine="sglang", engine_flags={"mem_fraction_static": 7}),
     "$.engine_flags.mem_fraction_static: 7.0 is greater than the maximum of 1"),
]


@pytest.mark.parametrize("line,message", CASES, ids=["gpu_memory_utilization", "max_model_len", "mem_fraction"])
def test_a_value_the_replayed_policy_refuses_names_the_point(tmp_path: Path, line: str, message: str) -> None:
    points = _points(tmp_path, json.dumps(GOOD), line)
    out = tmp_path / "pred.jsonl"
    out.write_text("earlier predictions\n")
    res = run_cli("timing", "check", str(points), "--output", str(out))
    assert res.returncode == 2
    assert res.stderr == f"error: {points}:2: {message}\n"
    assert out.read_text() == "earlier predictions\n"
    res = run_cli("timing", "fit", str(points), "--base", str(ROOFLINE_BASE), "--output", str(tmp_path / "f.yaml"),
                  "--rounds", "1", "--passes", "1")
    assert res.returncode == 2 and res.stderr == f"error: {points}:2: {message}\n"
    assert not (tmp_path / "f.yaml").exists()


def test_every_point_is_set_up_before_the_first_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    points = read_points(_points(tmp_path, json.dumps(GOOD), CASES[0][0]))

    def replayed(*args: object) -> None:
        raise AssertionError("a point was replayed before every point was set up")

    monkeypatch.setattr(check, "replay_setup", replayed)
    with pytest.raises(InputError, match=r"points\.jsonl:2: \$\.engine_flags\.gpu_memory_utilization"):
        check.check_points(points)


def test_an_error_no_point_field_explains_names_the_point(tmp_path: Path) -> None:
    """A value tickgate derives (here the tick limit it sets) has no place in the point: the
    point is named, and the policy's path said as the policy's."""
    from tickgate.timing.points import Origin

    origin = Origin(tmp_path / "points.jsonl", "point 'bad'", 3, {"$.timing.options.tensor_parallel_size": "$.tp"})
    assert str(origin.error("too slow", "$.limits.max_ticks")) == (
        f"{tmp_path / 'points.jsonl'}:3: point 'bad' ($.limits.max_ticks of the policy tickgate replays it "
        "with): too slow")
    assert str(origin.error("odd", "$.timing.options.tensor_parallel_size")) == (
        f"{tmp_path / 'points.jsonl'}:3: $.tp: odd")


def test_a_malformed_first_point_names_the_points_file_not_the_base(tmp_path: Path) -> None:
    """The file was taken for a benchmark run (no "id" on its first line), and the base file was
    blamed for not being a policy."""
    points = _points(tmp_path, json.dumps({k: v for k, v in GOOD.items() if k != "id"}), json.dumps(GOOD))
    res = run_cli("timing", "fit", str(points), "--base", str(ROOFLINE_BASE), "--output", str(tmp_path / "f.yaml"))
    assert res.returncode == 2
    assert res.stderr == f"error: {points}:1: expected a JSON object with a string 'id'\n"


def test_a_file_that_is_no_benchmark_run_is_named_before_the_base(tmp_path: Path) -> None:
    other = tmp_path / "notes.json"
    other.write_text('{"hello": 1}\n')
    res = run_cli("timing", "fit", str(other), "--base", str(ROOFLINE_BASE), "--output", str(tmp_path / "f.yaml"))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {other}"), res.stderr


def _base(tmp_path: Path, seqs: int, extra: str = "") -> Path:
    base = tmp_path / "policy.yaml"
    base.write_text("version: 1\nscheduler:\n  name: vllm-v1\n  options: {block_size: 16, num_gpu_blocks: 20000, "
                    f"max_num_seqs: {seqs}, max_num_batched_tokens: 8192}}\ntiming:\n  name: roofline\n"
                    f"  options: {{model: llama-3.1-8b, gpu: H100-SXM-80GB}}\n{extra}")
    return base


def test_a_benchmark_runs_base_policy_is_named_where_it_is_refused(tmp_path: Path) -> None:
    base = _base(tmp_path, 0)
    res = run_cli("timing", "fit", str(RUN), "--base", str(base), "--output", str(tmp_path / "f.yaml"))
    assert res.returncode == 2
    assert res.stderr == f"error: {base}:4:52: $.scheduler.options.max_num_seqs: 0 is less than the minimum of 1\n"
    base = _base(tmp_path, 8, "limits: {max_ticks: 10}\n")
    res = run_cli("timing", "fit", str(RUN), "--base", str(base), "--output", str(tmp_path / "f.yaml"),
                  "--rounds", "1", "--passes", "1")
    assert res.returncode == 2
    assert res.stderr == (f"error: {base}:8:10: $.limits.max_ticks: replay exceeded the tick limit of 10 steps "
                          "(raise limits.max_ticks in the policy if this is expected)\n")
    assert not (tmp_path / "f.yaml").exists()
