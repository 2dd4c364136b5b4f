"""Real benchmark-client files and copies edited the way each tool writes a case no run produced
(failed requests, a slower candidate, fresh request ids): shared by the gate tests of the clients
(tests/test_gate_clients.py, tests/test_gate_self.py). Each editing function says what it changes
and why it is faithful to the tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import REPO

CLIENTS = REPO / "fixtures" / "realdata" / "clients"
SMALL = REPO / "policies" / "gate-small-sample.yaml"
DEFAULT = REPO / "policies" / "gate-default.yaml"
VLLM = CLIENTS / "vllm_bench_serve_0.33"
SGLANG = CLIENTS / "sglang_bench_serving_0.5.23"
AIPERF = CLIENTS / "aiperf_0.13"
GENAI = CLIENTS / "genai_perf_0.0.16" / "genaiperf_chat_baseline" / "mock-model-openai-chat-request_rate8.0"
LATENCY_SIGNALS = {"latency-p95", "ttft-p95", "decode-token-p95"}
SERVER_ERROR = "HTTP 500: Internal Server Error"


# -- editing copies of the real files ---------------------------------------------------------------
def vllm_with_errors(src: Path, out: Path, every: int = 25) -> Path:
    """vllm bench serve's record of a failed request (benchmarks' RequestFuncOutput with
    success=False): the error text in ``errors``, ttft/latency 0, no itls, empty text, output 0;
    ``completed``/``failed`` recounted."""
    obj = json.loads(src.read_text())
    for i in range(0, len(obj["errors"]), every):
        obj["errors"][i] = SERVER_ERROR
        obj["ttfts"][i] = 0.0
        obj["itls"][i] = []
        obj["output_lens"][i] = 0
        obj["generated_texts"][i] = ""
        if "latencies" in obj:
            obj["latencies"][i] = 0.0
    failed = sum(1 for e in obj["errors"] if e)
    obj["failed"] = failed
    obj["completed"] = len(obj["errors"]) - failed
    out.write_text(json.dumps(obj))
    return out


def sglang_with_errors(src: Path, out: Path, every: int = 25) -> Path:
    """sglang.bench_serving writes the same per-request arrays (errors, ttfts, itls...) on one line."""
    lines = src.read_text().splitlines()
    last = lines[-1]
    tmp = out.with_suffix(".one.json")
    tmp.write_text(last)
    vllm_with_errors(tmp, tmp, every)
    obj = json.loads(tmp.read_text())
    obj.pop("failed", None)  # sglang writes no 'failed' key
    tmp.unlink()
    out.write_text("\n".join([*lines[:-1], json.dumps(obj)]) + "\n")
    return out


def aiperf_with_errors(src: Path, out: Path, every: int = 10) -> Path:
    """An aiperf error record: ``error`` is ErrorDetails {code, type, message}; only the
    input length survives, as ``error_isl``."""
    lines = []
    for i, line in enumerate(src.read_text().splitlines()):
        rec = json.loads(line)
        if i % every == 0:
            isl = rec["metrics"]["input_sequence_length"]
            rec["metrics"] = {"error_isl": isl}
            rec["error"] = {"code": 500, "type": "Internal Server Error", "message": "upstream failed"}
        lines.append(json.dumps(rec))
    out.write_text("\n".join(lines) + "\n")
    return out


def genai_with_errors(src: Path, out: Path, every: int = 10) -> Path:
    """perf_analyzer keeps the body of a failed HTTP response as the request's only response
    (vLLM's error body); genai-perf then finds no content in it."""
    obj = json.loads(src.read_text())
    for i, req in enumerate(obj["experiments"][0]["requests"]):
        if i % every == 0:
            req["response_timestamps"] = [req["timestamp"] + 3_000_000]
            req["response_outputs"] = [{"response": json.dumps(
                {"object": "error", "message": "Internal Server Error", "type": "InternalServerError", "code": 500})}]
    out.write_text(json.dumps(obj))
    return out


def genai_slower(src: Path, out: Path, factor: float = 1.2) -> Path:
    """A candidate whose server streams ``factor`` times slower after the first token, as the
    other clients' candidate_slow runs: every response after the first content response moves
    away from it by ``factor`` (TTFT unchanged)."""
    obj = json.loads(src.read_text())
    for req in obj["experiments"][0]["requests"]:
        ts = req["response_timestamps"]
        first = ts[1] if len(ts) > 1 else ts[0]  # ts[0] is the role-only chunk
        req["response_timestamps"] = [t if t <= first else first + round((t - first) * factor) for t in ts]
    out.write_text(json.dumps(obj))
    return out


def aiperf_fresh_ids(src: Path, out: Path) -> Path:
    """What a second aiperf run writes for the same dataset: new x_request_id/x_correlation_id
    UUIDs for every record, records in completion order (reversed here)."""
    lines = []
    for i, line in enumerate(reversed(src.read_text().splitlines())):
        rec = json.loads(line)
        rec["metadata"]["x_request_id"] = f"00000000-0000-4000-8000-{i:012d}"
        rec["metadata"]["x_correlation_id"] = f"11111111-0000-4000-8000-{i:012d}"
        lines.append(json.dumps(rec))
    out.write_text("\n".join(lines) + "\n")
    return out


# -- the four clients -------------------------------------------------------------------------------
CASES: dict[str, dict[str, Any]] = {
    "vllm-bench": dict(baseline=VLLM / "vllm_openai_baseline.json", slow=VLLM / "vllm_openai_candidate_slow.json",
                       errors=vllm_with_errors, policy=DEFAULT, matched=200),
    "sglang-bench": dict(baseline=SGLANG / "sglang_vllm_baseline.jsonl",
                         slow=SGLANG / "sglang_vllm_candidate_slow.jsonl", errors=sglang_with_errors,
                         policy=DEFAULT, matched=200),
    "aiperf": dict(baseline=AIPERF / "aiperf_chat_baseline" / "profile_export.jsonl",
                   slow=AIPERF / "aiperf_chat_candidate_slow" / "profile_export.jsonl", errors=aiperf_with_errors,
                   policy=SMALL, matched=80),
    "genai-perf": dict(baseline=GENAI / "profile_export.json", slow=None, errors=genai_with_errors,
                       policy=SMALL, matched=80),
}
