"""`normalize --evidence`: streaming evidence from a capture joins observations by request id."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES, run_cli

SSE = FIXTURES / "realdata" / "sse" / "vllm_v0.5_chat_stream_issue6083.sse"
STREAM_ID = "cmpl-840312ff78664572bb504e606140b952"


def observations(tmp_path: Path, ids: list[str]) -> Path:
    doc = {"version": 1, "kind": "tickgate.observations", "run": {"backend": "vllm"},
           "requests": [{"request_id": i, "latency_ms": 120.0, "tokens_out": 5} for i in ids]}
    path = tmp_path / "obs.json"
    path.write_text(json.dumps(doc))
    return path


def test_evidence_is_joined_by_request_id(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(observations(tmp_path, [STREAM_ID, "other"])), "--evidence", str(SSE),
                  "--output", str(out))
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    by_id = {r["request_id"]: r for r in doc["requests"]}
    assert by_id[STREAM_ID]["streaming"] == {"chunk_count": 6, "complete": False, "finish_reason": None,
                                             "timestamps": "none", "token_count": 5}
    assert "streaming" not in by_id["other"]
    assert f"streaming evidence from {SSE}: 1 requests matched" in doc["run"]["provenance"]["notes"]


def test_a_capture_matching_no_observation_is_an_error(tmp_path: Path) -> None:
    """A wrong evidence file must not pass unnoticed: exit 2, one line naming both files and the counts."""
    obs = observations(tmp_path, ["x"])
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(obs), "--evidence", str(SSE), "--output", str(out))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr == (f"error: {SSE}: no stream matches a request of {obs}: 0 of 1 stream ids found among "
                          "its 1 requests (evidence from another run?)\n")
    assert not out.exists()


def test_the_reviewers_repro_fails(tmp_path: Path) -> None:
    """aiperf records joined with an unrelated vLLM capture (the reported case)."""
    obs = FIXTURES / "realdata" / "aiperf_genaiperf_guidellm" / "aiperf_profile_export.jsonl"
    out = tmp_path / "ev.json"
    res = run_cli("normalize", str(obs), "--evidence", str(SSE), "--output", str(out))
    assert res.returncode == 2 and not out.exists()
    assert f"{SSE}: no stream matches a request of {obs}: 0 of 1 stream ids found among its 2 requests" in res.stderr


def _chunk(rid: str, text: str, finish: str | None) -> str:
    return "data: " + json.dumps({"id": rid, "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": text}, "finish_reason": finish}]}) + "\n\n"


def test_a_partial_match_is_kept_with_a_warning(tmp_path: Path) -> None:
    capture = tmp_path / "two.sse"
    capture.write_text(_chunk("chatcmpl-a", "hi", None) + _chunk("chatcmpl-a", "!", "stop")
                       + _chunk("chatcmpl-b", "yo", "stop") + _chunk("chatcmpl-c", "hey", "stop") + "data: [DONE]\n\n")
    obs = observations(tmp_path, ["chatcmpl-a", "other"])
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(obs), "--evidence", str(capture), "--output", str(out))
    assert res.returncode == 0, res.stderr
    warning, done = res.stderr.splitlines()
    assert warning == (f"warning: {capture}: 2 of 3 stream ids are not requests of {obs} (1 matched); "
                       "their evidence is not attached")
    assert done == f"{out}: neutral, 2 requests"
    doc = json.loads(out.read_text())
    assert doc["requests"][0]["streaming"]["chunk_count"] == 2 and "streaming" not in doc["requests"][1]
    notes = doc["run"]["provenance"]["notes"]
    assert f"streaming evidence from {capture}: 1 requests matched, 2 stream ids not in the observations" in notes


def test_a_full_match_gives_no_warning(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(observations(tmp_path, [STREAM_ID])), "--evidence", str(SSE),
                  "--output", str(out))
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr


def test_evidence_needs_a_capture_an_installed_parser_recognises(tmp_path: Path) -> None:
    bogus = tmp_path / "capture.txt"
    bogus.write_text("hello\n")
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(observations(tmp_path, ["x"])), "--evidence", str(bogus), "--output", str(out))
    assert res.returncode == 2 and not out.exists()
    assert "no evidence parsers recognise this capture; known: sglang-sse, vllm-sse" in res.stderr
