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


def test_unmatched_streams_are_counted(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(observations(tmp_path, ["x"])), "--evidence", str(SSE), "--output", str(out))
    assert res.returncode == 0, res.stderr
    notes = json.loads(out.read_text())["run"]["provenance"]["notes"]
    assert any("0 requests matched, 1 stream ids not in the observations" in n for n in notes)


def test_evidence_needs_a_capture_an_installed_parser_recognises(tmp_path: Path) -> None:
    bogus = tmp_path / "capture.txt"
    bogus.write_text("hello\n")
    out = tmp_path / "out.json"
    res = run_cli("normalize", str(observations(tmp_path, ["x"])), "--evidence", str(bogus), "--output", str(out))
    assert res.returncode == 2 and not out.exists()
    assert "no evidence parsers recognise this capture; known: sglang-sse, vllm-sse" in res.stderr
