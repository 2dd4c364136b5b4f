"""``tickgate plan`` (issue 23): the cheapest configuration whose replay meets every SLO, on a
real trace slice (the Azure code trace's first 300 requests under the toy vLLM v1 policy,
fixtures/policies/vllm-v1-toy.yaml: the bench preset's sizing before issue 32, which these SLOs and
ranges were chosen for).

``scheduler.options.max_num_seqs`` is the monotone parameter here: more sequences per step never
makes this slice's p99 TTFT miss a limit it met (the exhaustive run below checks it on this data);
the lead's ``cluster.replicas`` test on the Mooncake trace comes with fleets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, POLICIES, TOYS
from sweep_helpers import SEQS, TRACE

from tickgate.testing import run_cli

BASE = TOYS / "vllm-v1-toy.yaml"
SLO = "ttft_p99_ms=1000"
LO, HI = 12, 27


def plan(out: Path, *args: str, env: dict[str, str] | None = None,
         workload: tuple[str, ...] = ("--workload", str(TRACE), "--input-format", "azure", "--limit", "300"),
         policy: Path = BASE) -> object:
    return run_cli("plan", *workload, "--policy", str(policy), *args, "--output", str(out), env=env)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same question by bisection (a range) and exhaustively (the range's values as a list)."""
    root = tmp_path_factory.mktemp("plan")
    outs = {"bisect": root / "bisect.json", "every": root / "every.json"}
    for name, vary in (("bisect", f"{SEQS}={LO}..{HI}"),
                       ("every", f"{SEQS}={','.join(str(v) for v in range(LO, HI + 1))}")):
        result = plan(outs[name], "--slo", SLO, "--vary", vary, "--jobs", "2")
        assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
        assert result.stderr == ""  # type: ignore[attr-defined]  # not a terminal: no progress
        outs[name + ".stdout"] = result.stdout  # type: ignore[attr-defined, assignment]
    return outs


def test_bisection_finds_what_enumeration_finds_with_fewer_replays(searched: dict[str, Path]) -> None:
    bisect, every = load(searched["bisect"]), load(searched["every"])
    met = [entry["met"] for entry in every["evidence"]]
    assert len(met) == HI - LO + 1
    # monotone on this data: misses below the line, meets from it on, the line inside the range
    first = met.index(True)
    assert 0 < first and all(met[first:]) and not any(met[:first])
    assert bisect["recommendation"]["values"] == every["recommendation"]["values"] == {SEQS: LO + first}
    assert bisect["recommendation"]["cost"] == {"gpus": 1}
    assert len(bisect["evidence"]) <= 1 + (HI - LO).bit_length() < len(every["evidence"])
    # HI first, then the halves; every figure the same as the exhaustive run's at that value
    assert bisect["evidence"][0]["values"] == {SEQS: HI}
    by_value = {e["values"][SEQS]: e for e in every["evidence"]}
    for entry in bisect["evidence"]:
        twin = by_value[entry["values"][SEQS]]
        for key in ("slos", "fingerprint", "met"):
            assert entry[key] == twin[key]


def test_the_choice_meets_the_slo_and_one_fewer_misses(searched: dict[str, Path], tmp_path: Path) -> None:
    data = load(searched["bisect"])
    chosen = data["recommendation"]["values"][SEQS]
    by_value = {e["values"][SEQS]: e for e in data["evidence"]}
    assert by_value[chosen]["met"] and not by_value[chosen - 1]["met"]  # the evidence has both sides
    base = BASE.read_text(encoding="utf-8")
    for value, meets in ((chosen, True), (chosen - 1, False)):  # checked again by tickgate replay itself
        policy = tmp_path / f"seqs{value}.yaml"
        policy.write_text(base.replace("max_num_seqs: 64", f"max_num_seqs: {value}"), encoding="utf-8")
        out = tmp_path / f"r{value}.json"
        res = run_cli("replay", "--input", str(TRACE), "--input-format", "azure", "--limit", "300",
                      "--policy", str(policy), "--output", str(out))
        assert res.returncode == 0, res.stderr
        report = load(out)
        assert (report["latency"]["ttft_ms"]["p99"] <= 1000) is meets
        assert report["latency"]["ttft_ms"]["p99"] == by_value[value]["slos"]["ttft_p99_ms"]["measured"]
        assert report["summary"]["trace_fingerprint"] == by_value[value]["fingerprint"]


def test_plan_json_has_the_question_the_recommendation_and_the_evidence(searched: dict[str, Path]) -> None:
    data = load(searched["bisect"])
    assert list(data) == ["version", "question", "recommendation", "evidence"]
    assert data["question"] == {
        "policy": str(BASE),
        "workload": {"path": str(TRACE), "format": "azure", "block_size": None, "limit": 300},
        "slos": {"ttft_p99_ms": 1000.0}, "goodput": None, "vary": {SEQS: {"range": [LO, HI]}}, "cost": "gpus"}
    rec = data["recommendation"]
    assert set(rec) == {"values", "cost", "run"}
    assert data["evidence"][rec["run"] - 1]["values"] == rec["values"]
    assert [e["run"] for e in data["evidence"]] == list(range(1, len(data["evidence"]) + 1))
    for entry in data["evidence"]:
        assert set(entry) == {"run", "values", "cost", "met", "slos", "completed", "rejected", "fingerprint"}
        figure = entry["slos"]["ttft_p99_ms"]
        assert figure["limit"] == 1000.0
        assert figure["margin"] == round(1000.0 - figure["measured"], 3)
        assert figure["met"] is (figure["measured"] <= 1000.0) is entry["met"]
        assert entry["completed"] == 300 and entry["rejected"] == 0
    # the printed evidence: a header, one line per run, the recommendation
    lines = str(searched["bisect.stdout"]).splitlines()
    assert lines[0].split() == ["run", "max_num_seqs", "gpus", "ttft_p99_ms", "met"]
    assert len(lines) == len(data["evidence"]) + 2
    assert lines[-1] == (f"recommendation: {SEQS}={rec['values'][SEQS]} (1 GPU, run {rec['run']}; "
                         f"{len(data['evidence'])} runs) -> {searched['bisect']}")


def test_plan_json_is_the_same_bytes_with_one_job_and_another_hash_seed(searched: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    result = plan(out, "--slo", SLO, "--vary", f"{SEQS}={LO}..{HI}", "--jobs", "1",
                  env={"PYTHONHASHSEED": "7"})
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    assert out.read_bytes() == searched["bisect"].read_bytes()


def test_the_cheapest_listed_configuration_wins_not_the_first(tmp_path: Path) -> None:
    """Tensor parallel is GPUs: of 4, 2 and 1 the smallest that meets is chosen, after a
    combination (64 KV blocks) that rejects requests: its p99 TTFT, over the requests it
    completed, is within the limit, and it still meets nothing."""
    policy = tmp_path / "roofline.yaml"
    text = BASE.read_text(encoding="utf-8")
    policy.write_text(text[:text.index("timing:")] + "timing:\n  name: roofline\n  options: {model: "
                      "llama-3.1-8b, gpu: H100-SXM-80GB, engine: vllm, tensor_parallel_size: 1}\n",
                      encoding="utf-8")
    out = tmp_path / "plan.json"
    result = plan(out, "--slo", "ttft_p99_ms=400", "--vary", "scheduler.options.num_gpu_blocks=64,2048",
                  "--vary", "timing.options.tensor_parallel_size=4,2,1", "--jobs", "2", policy=policy)
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    data = load(out)
    blocks, tp = "scheduler.options.num_gpu_blocks", "timing.options.tensor_parallel_size"
    assert [(e["values"][blocks], e["values"][tp], e["cost"]["gpus"]) for e in data["evidence"]] == [
        (64, 4, 4), (64, 2, 2), (64, 1, 1), (2048, 4, 4), (2048, 2, 2), (2048, 1, 1)]
    assert all(e["rejected"] > 0 and not e["met"] for e in data["evidence"][:3])
    assert data["evidence"][0]["slos"]["ttft_p99_ms"]["met"]  # fast, by turning requests away
    met = {e["values"][tp]: e["met"] for e in data["evidence"][3:]}
    assert met == {4: True, 2: True, 1: False}  # the limit sits between one GPU and two
    assert data["recommendation"]["values"] == {blocks: 2048, tp: 2}
    assert data["recommendation"]["cost"] == {"gpus": 2}


def test_goodput_counts_every_request_beyond_the_detail_limit(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = plan(out, "--slo", "ttft_p99_ms=1000", "--slo", "e2e_p99_ms=20000", "--goodput", "0.95",
                  "--vary", f"{SEQS}=8,64")
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    low, high = load(out)["evidence"]
    for entry in (low, high):
        g = entry["slos"]["goodput"]
        assert g["requests"] == 300 and g["measured"] == round(g["good"] / 300, 6)
        assert g["margin"] == round(g["measured"] - 0.95, 6) and g["met"] is (g["measured"] >= 0.95)
    assert low["slos"]["goodput"]["good"] < high["slos"]["goodput"]["good"]
    # the count is the outcomes' (all 300 here: under the report's detail limit), checked the long way
    policy = tmp_path / "p.yaml"
    policy.write_text(BASE.read_text(encoding="utf-8").replace("max_num_seqs: 64", "max_num_seqs: 8"),
                      encoding="utf-8")
    res = run_cli("replay", "--input", str(TRACE), "--input-format", "azure", "--limit", "300",
                  "--policy", str(policy), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    outcomes = load(tmp_path / "r.json")["outcomes"]
    good = sum(1 for o in outcomes if o["status"] == "completed"
               and o["first_token_ms"] - o["arrival_ms"] <= 1000
               and o["finished_ms"] - o["arrival_ms"] <= 20000)
    assert low["slos"]["goodput"]["good"] == good


def test_goodput_sees_outcomes_the_report_leaves_out() -> None:
    """The sink is handed to the replay: a detail limit of 0 keeps no outcome in the report,
    and the count is still over every request."""
    from tickgate.sweep.goodput import GoodputSink
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay
    from tickgate.workload.sources import open_requests

    sink = GoodputSink({"ttft": 1000.0})
    requests, inputs = open_requests(TRACE, "azure", limit=300)
    report = replay(requests, load_policy(BASE), inputs=inputs, detail_limit=0, extra_sinks=[sink])
    assert report["outcomes"] == [] and report["outcomes_omitted"] == 300
    assert sink.counts()["requests"] == 300 and 0 < sink.counts()["good"] < 300


def test_nothing_meeting_the_slos_exits_1_with_the_evidence_written(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = plan(out, "--slo", "ttft_p99_ms=10", "--vary", f"{SEQS}=1..64")
    assert result.returncode == 1  # type: ignore[attr-defined]
    assert result.stderr.strip() == (  # type: ignore[attr-defined]
        f"error: no configuration meets the SLOs (1 run); the evidence is in {out}")
    data = load(out)
    assert data["recommendation"] is None
    assert [e["values"] for e in data["evidence"]] == [{SEQS: 64}]  # the top of the range misses: done
    assert data["evidence"][0]["met"] is False


def one_line(result: object) -> str:
    assert result.returncode == 2, result.stderr  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--slo", "ttft_p99=1000", "--vary", f"{SEQS}=1..8"],
     "error: --slo ttft_p99=1000: unknown SLO 'ttft_p99'"),
    (["--slo", "ttft_p99_ms", "--vary", f"{SEQS}=1..8"],
     "error: --slo ttft_p99_ms: expected NAME=MILLISECONDS"),
    (["--slo", "ttft_p99_ms=-5", "--vary", f"{SEQS}=1..8"], "must be a positive number of milliseconds"),
    (["--slo", SLO, "--vary", SEQS], f"error: --vary {SEQS}: expected PATH=LO..HI"),
    (["--slo", SLO, "--vary", f"{SEQS}=8..1"], "the range is empty (8 > 1)"),
    (["--slo", SLO, "--vary", f"{SEQS}=1..x"], "a range is LO..HI with integer ends"),
    (["--slo", SLO, "--vary", f"{SEQS}=4,,8"], "an empty value in the list"),
    (["--slo", SLO, "--vary", "scheduler.options.max_num_seq=1..8"],
     "error: --vary scheduler.options.max_num_seq=1..8: scheduler.options.max_num_seq is not in the policy"),
    (["--slo", SLO, "--vary", f"{SEQS}=1..8", "--vary", "scheduler.options.num_gpu_blocks=512..4096"],
     "only one --vary may be a range"),
    (["--slo", SLO, "--vary", "scheduler.options.policy=1..3"], "a range varies an integer setting"),
    (["--slo", SLO, "--vary", f"{SEQS}=0..8"],
     f"error: --vary {SEQS}=0..8: 0 is refused: $.scheduler.options.max_num_seqs: "
     "0 is less than the minimum of 1"),
    (["--slo", SLO, "--vary", f"{SEQS}=1..8", "--vary", f"{SEQS}=4,8"], f"{SEQS} is varied twice"),
    (["--slo", SLO, "--goodput", "1.5", "--vary", f"{SEQS}=1..8"],
     "error: --goodput 1.5: expected a fraction"),
    (["--slo", "itl_p99_ms=50", "--goodput", "0.9", "--vary", f"{SEQS}=1..8"], "needs a per-request SLO"),
])
def test_bad_options_are_one_line_and_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "plan.json"
    line = one_line(plan(out, *args))
    assert message in line, line
    assert not out.exists()


def test_an_untimed_policy_a_missing_workload_and_missing_ray_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    line = one_line(plan(out, "--slo", SLO, "--vary", "scheduler.options.kv_pages=20..40",
                         policy=POLICIES / "default.yaml"))
    assert "the policy has no timing section" in line
    line = one_line(plan(out, "--slo", SLO, "--vary", f"{SEQS}=1..8",
                         workload=("--workload", str(tmp_path / "nope.csv"), "--input-format", "azure")))
    assert line == f"error: {tmp_path / 'nope.csv'}: workload file not found"
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("No module named \'ray\'")\n', encoding="utf-8")
    line = one_line(plan(out, "--slo", SLO, "--vary", f"{SEQS}=1..8", "--executor", "ray",
                         env={"PYTHONPATH": str(tmp_path / "shim")}))
    assert line == "error: --executor ray needs Ray, which is not installed: pip install 'tickgate[ray]'"
    assert not out.exists()


def test_progress_counts_runs_on_a_terminal_only(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tickgate.commands.cli import main

    args = ["plan", "--workload", str(FIXTURES / "workload.json"), "--policy", str(tmp_path / "p.yaml"),
            "--slo", "ttft_p99_ms=100000", "--vary", f"{SEQS}=1..4"]
    # the bundled workload has arrival ticks: the bench preset's timing maps them onto ms
    (tmp_path / "p.yaml").write_text(BASE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main([*args, "--output", str(tmp_path / "tty.json")]) == 0
    out, err = capsys.readouterr()
    assert "plan: " in err and "\r" in err
    assert "recommendation: " in out and err not in out
    piped = run_cli(*args, "--output", str(tmp_path / "pipe.json"))
    assert piped.returncode == 0 and piped.stderr == ""
    assert (tmp_path / "pipe.json").read_bytes() == (tmp_path / "tty.json").read_bytes()


@pytest.mark.parametrize(("document", "expected"), [
    ({"scheduler": {"name": "vllm-v1", "options": {}}}, 1),
    ({"timing": {"name": "roofline", "options": {"tensor_parallel_size": 4}}}, 4),
    ({"cluster": {"replicas": 3}, "timing": {"name": "roofline", "options": {"tensor_parallel_size": 2}}}, 6),
    ({"cluster": {"replicas": 2, "data_parallel_size": 2},
      "timing": {"name": "roofline", "options": {"tensor_parallel_size": 2}}}, 8),
    ({"cluster": {"pools": {"prefill": {"replicas": 2}, "decode": {
        "replicas": 3, "timing": {"name": "roofline", "options": {"tensor_parallel_size": 4}}}}},
      "timing": {"name": "linear", "options": {}}}, 2 + 12),
    ({"scheduler": {"name": "x", "options": {"data_parallel_size": 4}}}, 4),
])
def test_cost_is_replicas_times_tensor_times_data_parallel(document: dict, expected: int) -> None:
    from tickgate.plan.spec import gpus

    assert gpus(document) == expected


def test_a_failed_replay_is_evidence_that_misses_and_a_warning(tmp_path: Path) -> None:
    """A 1024-token budget takes this slice 2600 steps, past the policy's tick limit: that
    combination's replay fails, the other one is searched and recommended."""
    policy = tmp_path / "limited.yaml"
    policy.write_text(BASE.read_text(encoding="utf-8") + "limits:\n  max_ticks: 2550\n", encoding="utf-8")
    out = tmp_path / "plan.json"
    tokens = "scheduler.options.max_num_batched_tokens"
    result = plan(out, "--slo", SLO, "--vary", f"{tokens}=1024,2048", "--vary", f"{SEQS}={LO}..{HI}",
                  policy=policy)
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    data = load(out)
    failed = data["evidence"][0]
    assert failed["values"] == {tokens: 1024, SEQS: HI} and failed["met"] is False
    assert "replay exceeded the tick limit of 2550 steps" in failed["error"]
    assert set(failed) == {"run", "values", "cost", "met", "error"}
    assert all("error" not in e for e in data["evidence"][1:])  # 1024 tokens: done after HI
    assert data["recommendation"]["values"][tokens] == 2048
    warning = result.stderr.strip()  # type: ignore[attr-defined]
    assert warning.startswith(f"warning: 1 of {len(data['evidence'])} runs failed and count as missing "
                              "the SLOs (first: run 1: ")
    assert len(warning.splitlines()) == 1


def test_the_smallest_fleet_meeting_a_ttft_and_itl_slo_on_the_mooncake_trace(tmp_path: Path) -> None:
    """Issue 23's done-when: replicas bisected on the Mooncake conversation trace under the
    round-robin fleet preset; the recommendation meets both SLOs and one replica fewer misses
    (in the evidence, and replayed again by tickgate replay)."""
    mooncake = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
    base = POLICIES / "fleet-round-robin.yaml"
    out = tmp_path / "PLAN.json"
    res = run_cli("plan", "--workload", str(mooncake), "--input-format", "mooncake", "--limit", "600",
                  "--policy", str(base), "--slo", "ttft_p50_ms=1000", "--slo", "itl_p99_ms=100",
                  "--vary", "cluster.replicas=1..12", "--output", str(out))
    assert res.returncode == 0, res.stderr
    data = load(out)
    chosen = data["recommendation"]["values"]["cluster.replicas"]
    assert data["recommendation"]["cost"] == {"gpus": chosen} and chosen > 1  # one GPU per replica
    by_value = {e["values"]["cluster.replicas"]: e for e in data["evidence"]}
    assert by_value[chosen]["met"] and not by_value[chosen - 1]["met"]
    assert len(data["evidence"]) < 12  # bisected, not enumerated
    for value, meets in ((chosen, True), (chosen - 1, False)):
        policy = tmp_path / f"fleet{value}.yaml"
        policy.write_text(base.read_text(encoding="utf-8").replace("replicas: 4", f"replicas: {value}"),
                          encoding="utf-8")
        report_path = tmp_path / f"r{value}.json"
        res = run_cli("replay", "--input", str(mooncake), "--input-format", "mooncake", "--limit", "600",
                      "--policy", str(policy), "--output", str(report_path), "--quiet")
        assert res.returncode == 0, res.stderr
        lat = load(report_path)["latency"]
        assert (lat["ttft_ms"]["p50"] <= 1000 and lat["itl_ms"]["p99"] <= 100) is meets
        assert load(report_path)["summary"]["trace_fingerprint"] == by_value[value]["fingerprint"]
