"""The example's plugins pass tickgate's contract kit, plus tests of what is
specific to them: located errors in the CSV and the aging order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickgate import AdmissionContext, InputError, Request
from tickgate.testing import AdmissionPolicyContract, BackendMirrorContract

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "samples"
DIST = "tickgate-example-adapter"


class TestExampleCsvMirror(BackendMirrorContract):
    plugin_name = "example-csv"
    distribution = DIST
    sample = SAMPLES / "candidate.csv"
    gate_policy = HERE.parent / "policies" / "example.yaml"


class TestShortestPromptAging(AdmissionPolicyContract):
    plugin_name = "shortest-prompt-aging"
    distribution = DIST
    options = {"aging_tokens_per_tick": 8, "max_prompt_tokens": 4096}
    bad_options = (["not", "a", "mapping"], {"aging_tokens_per_tick": -1}, {"no_such_option": 1})


def _read(tmp_path: Path, text: str) -> dict:
    from tickgate_example_adapter.csv_mirror import ExampleCsvMirror

    path = tmp_path / "run.csv"
    path.write_text(text, encoding="utf-8")
    return ExampleCsvMirror().read(path)


HEADER = "request_id,latency_ms,ttft_ms,tokens_out,error,output_sha\n"


def test_bad_cell_names_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        _read(tmp_path, HEADER + "a,10,2,3,,\nb,fast,2,3,,\n")
    assert (caught.value.line, caught.value.column) == (3, 3)
    assert str(caught.value).endswith("run.csv:3:3: latency_ms: expected milliseconds (a number), found 'fast'")


def test_duplicate_id_points_at_the_first(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r":3:1: request_id: 'a' already on line 2"):
        _read(tmp_path, HEADER + "a,10,2,3,,\na,11,2,3,,\n")


def test_empty_cells_are_left_out_and_errors_kept(tmp_path: Path) -> None:
    doc = _read(tmp_path, "# example-csv v2\n" + HEADER + "a,10,,3,,\nb,,,,timeout,\n")
    assert doc["requests"] == [{"request_id": "a", "latency_ms": 10.0, "tokens_out": 3},
                               {"request_id": "b", "error": "timeout"}]
    assert doc["run"]["provenance"]["format_version"] == "v2"
    assert doc["run"]["aggregates"]["error_rate"] == 0.5


def _request(rid: str, prompt: int, tick: int = 0) -> Request:
    return Request(id=rid, prompt_tokens=prompt, max_output_tokens=4, arrival_tick=tick)


def test_short_prompts_first_until_a_long_one_has_aged() -> None:
    from tickgate_example_adapter.admission import ShortestPromptAging

    policy = ShortestPromptAging.build({"aging_tokens_per_tick": 10},
                                       AdmissionContext(kv_capacity_pages=64, page_size=16, timing=None))
    policy.enqueue(_request("long", 100), 0)
    policy.enqueue(_request("short", 20, 5), 5)
    assert [r.id for r in policy.candidates(5)] == ["short", "long"]  # effective 20 < 50
    # both fully aged (effective 0): the earlier arrival goes first, so nothing starves
    assert [r.id for r in policy.candidates(10)] == ["long", "short"]


def test_prompt_over_the_limit_is_refused_with_a_reason() -> None:
    from tickgate_example_adapter.admission import ShortestPromptAging

    policy = ShortestPromptAging.build({"max_prompt_tokens": 64},
                                       AdmissionContext(kv_capacity_pages=64, page_size=16, timing=None))
    assert policy.enqueue(_request("big", 65), 0) == "prompt of 65 tokens over max_prompt_tokens 64"
    assert len(policy) == 0
