"""Trace importers on the real traces (fixtures/realdata/traces), the synthetic
BurstGPT sample in the real layout, and malformed rows (fixtures/invalid/traces)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, REPO, run_cli

from tickgate.commands.cli import main
from tickgate.util.errors import InputError, TickgateError
from tickgate.host.registry import get_registry
from tickgate.workload.format import read_workload

TRACES = FIXTURES / "realdata" / "traces"
MOONCAKE = TRACES / "mooncake_conversation_trace.jsonl"
AZURE = TRACES / "AzureLLMInferenceTrace_code.csv"
SPLITWISE = TRACES / "splitwise_sim_test_trace.csv"
BURSTGPT = FIXTURES / "traces" / "burstgpt_sample.csv"
BURSTGPT_V1 = FIXTURES / "traces" / "burstgpt_v1_sample.csv"
INVALID = FIXTURES / "invalid" / "traces"
SEED_BENCH = REPO / "benchmarks" / "policies" / "seed-bench.yaml"


def read(fmt: str, path: Path, **options: Any) -> tuple[list[Any], dict[str, Any]]:
    reader = get_registry().get("workload_reader", fmt).obj()
    requests = list(reader.read(path, options))
    return requests, reader.source


def import_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["import", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- registration ---------------------------------------------------------------
def test_readers_register_through_the_importers_entry_point() -> None:
    for name in ("mooncake", "azure", "burstgpt", "splitwise"):
        info = get_registry().get("workload_reader", name)
        assert (info.distribution, info.entry_point) == ("tickgate", "importers")


# -- real files -------------------------------------------------------------------
def test_mooncake_conversation_trace() -> None:
    requests, source = read("mooncake", MOONCAKE)
    assert len(requests) == 12031
    assert source == {"format": "mooncake", "file": str(MOONCAKE), "rows": 12031, "requests": 12031,
                      "time_origin": "arrival_ms is relative to the first row", "block_size": 512}
    first, last = requests[0], requests[-1]
    assert (first.id, first.prompt_tokens, first.max_output_tokens, first.arrival_ms) == ("mc-00000001", 6758, 500, 0.0)
    assert first.prefix_blocks == tuple(range(14))
    assert requests[1].prefix_blocks[:2] == (0, 14)  # the shared system-prompt block
    assert (last.id, last.prompt_tokens, last.max_output_tokens, last.arrival_ms) == ("mc-00012031", 20774, 508,
                                                                                      3536999.0)
    assert all(len(r.prefix_blocks) == -(-r.prompt_tokens // 512) for r in requests)
    assert sum(r.prompt_tokens for r in requests) == 144_793_823  # summed from the raw file independently
    assert [r.arrival_ms for r in requests] == sorted(r.arrival_ms for r in requests)


def test_mooncake_block_size_is_checked_against_the_prompt() -> None:
    reader = get_registry().get("workload_reader", "mooncake").obj()
    with pytest.raises(InputError) as err:
        next(reader.read(MOONCAKE, {"block_size": 16}))
    assert str(err.value) == (f"{MOONCAKE}:1: hash_ids has 14 ids but input_length 6758 needs 423 at block size "
                              "16; is --block-size right? (the Mooncake release uses 512)")


def test_azure_code_trace() -> None:
    requests, source = read("azure", AZURE)
    assert len(requests) == 8819 and source["rows"] == 8819 and "skipped" not in source
    first, second, last = requests[0], requests[1], requests[-1]
    assert (first.id, first.prompt_tokens, first.max_output_tokens, first.arrival_ms) == ("az-00000002", 4808, 10, 0.0)
    assert second.arrival_ms == 52.0  # 18:17:04.0319600 - 18:17:03.9799600
    assert (last.id, last.prompt_tokens, last.max_output_tokens) == ("az-00008820", 549, 173)
    assert last.arrival_ms == 3435948.056  # 19:14:19.9280160 - 18:17:03.9799600, exact
    assert all(r.prefix_blocks is None and r.tenant is None for r in requests)


def test_splitwise_test_trace() -> None:
    requests, source = read("splitwise", SPLITWISE)
    assert [(r.id, r.prompt_tokens, r.max_output_tokens, r.arrival_ms, r.tenant) for r in requests] == [
        ("0", 4096, 32, 0.0, "0"), ("1", 2048, 8, 2000.0, "0"), ("2", 2048, 16, 3000.0, "0")]
    assert source["requests"] == 3


def test_burstgpt_failed_rows_are_skipped_and_reported() -> None:
    requests, source = read("burstgpt", BURSTGPT)
    assert source["rows"] == 40 and source["requests"] == 36 == len(requests)
    assert source["skipped"] == {"failed request (Response tokens == 0)": {"count": 4, "first_lines": [8, 19, 20, 35]}}
    first = requests[0]
    assert (first.id, first.prompt_tokens, first.max_output_tokens, first.arrival_ms) == ("bg-00000002", 2686, 50, 0.0)
    assert (first.tenant, first.lane) == ("Conversation log", "ChatGPT")
    assert requests[2].arrival_ms == 2000.0 and requests[2].lane == "GPT-4"
    assert {r.tenant for r in requests} == {"Conversation log", "API log"}
    old, old_source = read("burstgpt", BURSTGPT_V1)
    assert [r.id for r in old] == [r.id for r in requests[:11]]
    assert old_source["skipped"]["failed request (Response tokens == 0)"]["first_lines"] == [8]


def test_import_cli_reports_failed_rows_in_header_and_stderr(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.json"
    code, stdout, err = import_cli(capsys, "burstgpt", str(BURSTGPT), "--output", str(out))
    assert code == 0
    assert err.strip() == (f"warning: {BURSTGPT}: skipped 4 row(s) with failed request (Response tokens == 0) "
                           "(lines 8, 19, 20, 35)")
    assert stdout.startswith(f"imported 36 requests from {BURSTGPT} (burstgpt, 4 skipped)")
    workload = read_workload(out)
    assert workload.header.source["skipped"]["failed request (Response tokens == 0)"]["count"] == 4
    assert len(list(workload.requests)) == 36


def test_import_limit_and_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.json"
    code, _, _ = import_cli(capsys, "mooncake", str(MOONCAKE), "--output", str(out), "--limit", "100")
    assert code == 0
    head = json.loads(out.read_text().splitlines()[0] + "]}")
    assert head["block_size"] == 512
    assert head["source"]["limit"] == 100 and head["source"]["requests"] == 100
    requests = list(read_workload(out).requests)
    assert len(requests) == 100 and requests[-1].id == "mc-00000100"
    assert requests == read("mooncake", MOONCAKE)[0][:100]


def test_import_errors_for_options_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.json"
    assert main(["import", "azure", str(AZURE), "--output", str(out), "--block-size", "16"]) == 2
    assert "--block-size: the azure format has no prefix-block ids" in capsys.readouterr().err
    assert main(["import", "sharegpt", str(AZURE), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert 'unknown workload_reader "sharegpt"; available: aiperf, azure, burstgpt, genai-perf, mooncake, sglang-bench, splitwise, vllm-bench' in err
    assert main(["import", "azure", str(tmp_path / "nope.csv"), "--output", str(out)]) == 2
    assert "nope.csv: file not found" in capsys.readouterr().err
    assert not out.exists()


def _invalid_cases() -> list[Path]:
    return sorted(p for p in INVALID.iterdir() if p.suffix != ".error")


@pytest.mark.parametrize("case", _invalid_cases(), ids=lambda p: p.name)
def test_malformed_rows_give_one_located_line(case: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    fmt = case.name.split("--")[0]
    out = tmp_path / "w.json"
    code, stdout, err = import_cli(capsys, fmt, str(case), "--output", str(out))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {case}")
    assert case.with_suffix(".error").read_text().strip() in lines[0]
    assert not out.exists() and not list(tmp_path.iterdir())  # no output, no leftover spool


def test_malformed_rows_fail_replay_input_format_too(tmp_path: Path) -> None:
    case = INVALID / "azure--out-of-order.csv"
    res = run_cli("replay", "--input", str(case), "--input-format", "azure", "--policy", str(SEED_BENCH),
                  "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{case}:3: TIMESTAMP 2023-11-16 18:17:03.9799600 is earlier than the row on line 2" in res.stderr
    assert not (tmp_path / "r.json").exists()


def test_reader_rejects_bad_block_size_option() -> None:
    reader = get_registry().get("workload_reader", "mooncake").obj()
    with pytest.raises(TickgateError, match="--block-size must be an integer from 1 to 65536"):
        next(reader.read(MOONCAKE, {"block_size": 0}))


# -- a trace given without --input-format ------------------------------------------
@pytest.mark.parametrize(("trace", "where"), [(AZURE, "1:1: invalid JSON"), (SPLITWISE, "1:1: invalid JSON"),
                                              (MOONCAKE, "2:1: invalid JSON")])
def test_a_trace_read_as_a_workload_says_so_and_lists_the_formats(trace: Path, where: str, tmp_path: Path) -> None:
    """Issue 32: a CSV trace without --input-format said "invalid JSON" and nothing else. The
    error says what format was assumed and names every registered reader by the kind of file
    it reads (each built-in reader's kind checked against the file it reads above)."""
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(trace), "--output", str(out))
    assert res.returncode == 2 and not out.exists() and "Traceback" not in res.stderr
    line, = res.stderr.strip().splitlines()
    assert line.startswith(f"error: {trace}:{where}")
    assert "read as a tickgate workload file, the default --input-format" in line
    assert line.endswith("--input-format: azure, burstgpt or splitwise (CSV), genai-perf or vllm-bench (JSON), "
                         "aiperf, mooncake or sglang-bench (JSONL))")


def test_a_workload_with_a_wrong_header_gets_no_format_hint(tmp_path: Path) -> None:
    """The hint is for a file that is not a workload at all, not for a workload with a bad member."""
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"version": 1, "requests": [], "extra": 1}), encoding="utf-8")
    res = run_cli("replay", "--input", str(path), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2 and "unknown key 'extra'" in res.stderr and "--input-format" not in res.stderr
