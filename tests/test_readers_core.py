"""Shared reader machinery: SSE framing and evidence, Prometheus quantiles,
msgpack, detection ambiguity, the normalize command (merge, atomic output,
determinism) and `tickgate plugins` listing formats by distribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from readers_helpers import REAL, REPO, read, registry
from tickgate.util.errors import InputError
from tickgate.readers.kv_events import decode_all
from tickgate.readers.prometheus import parse_text
from tickgate.readers.stats import histogram_quantile, summarize


def test_timed_sse_gives_first_token_and_gaps(tmp_path):
    cap = tmp_path / "timed.sse"
    rid = "chatcmpl-abc"
    chunk = '{"id":"%s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}'
    cap.write_text(
        ": recv_ms=12.5\ndata: " + chunk % (rid, '{"role":"assistant"}', "null") + "\n\n"
        ": recv_ms=40\ndata: " + chunk % (rid, '{"content":"Hi"}', "null") + "\n\n"
        ": recv_ms=55.5\ndata: " + chunk % (rid, '{"content":" there"}', "null") + "\n\n"
        ": recv_ms=70\ndata: " + chunk % (rid, '{}', '"stop"') + "\n\n"
        "data: [DONE]\n\n")
    (req,) = read(cap)["requests"]
    st = req["streaming"]
    assert st["timestamps"] == "receive" and st["first_token_ms"] == 40.0 and st["gaps_ms"] == [15.5]
    assert req["ttft_ms"] == 40.0 and st["finish_reason"] == "stop" and st["complete"] is True


def test_timed_jsonl_and_interleaved_requests(tmp_path):
    def c(rid, text, fin=None):
        return {"id": rid, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": text}, "finish_reason": fin, "matched_stop": None}]}
    a, b = "a" * 32, "b" * 32
    rows = [(5, c(a, "x")), (6, c(b, "y")), (9, c(a, "z", "stop")), (20, c(b, "w"))]
    cap = tmp_path / "cap.jsonl"
    cap.write_text("".join(json.dumps({"recv_ms": t, "data": d}) + "\n" for t, d in rows))
    doc = read(cap)
    assert doc["run"]["provenance"]["format"] == "sglang-sse"
    ra, rb = doc["requests"]
    assert (ra["request_id"], ra["streaming"]["gaps_ms"], ra["streaming"]["complete"]) == (a, [4.0], True)
    assert (rb["streaming"]["first_token_ms"], rb["streaming"]["complete"]) == (6.0, False)
    assert doc["run"]["aggregates"]["completed"] == 1


def test_stream_cut_mid_chunk_is_partial_not_error(tmp_path):
    text = (REAL / "sse/vllm_v0.5_chat_stream_issue6083.sse").read_text()
    cap = tmp_path / "cut.sse"
    cap.write_text(text[: text.rindex("阿里") + 2])  # ends inside the third chunk's JSON
    doc = read(cap)
    (req,) = doc["requests"]
    assert req["streaming"]["token_count"] == 1 and req["streaming"]["complete"] is False
    assert any("cut mid-way" in n and "line 5" in n for n in doc["run"]["provenance"]["notes"])


def test_evidence_parser_interface():
    reg = registry()
    parser = reg.get("evidence_parser", "sglang-sse").obj()
    path = REAL / "sse/sglang_chat_stream_genai_bench_fixture.sse"
    assert parser.sniff(path, path.read_bytes())
    assert parser.parse(path) == [{"request_id": "4e28a148aa324b98b91853b724469d91", "streaming": {
        "chunk_count": 2, "complete": True, "finish_reason": "length", "timestamps": "none", "token_count": 1,
        "usage": {"completion_tokens": 1, "prompt_tokens": 5, "prompt_tokens_details": None, "total_tokens": 6}}}]


def test_prometheus_escapes_and_histogram_sum_over_engines():
    s = parse_text('m{a="x\\"y",engine="0"} 1\nm{a="z",engine="1"} 2.5 1700000000\n'
                   'h_bucket{engine="0",le="1"} 2\nh_bucket{engine="1",le="1"} 2\n'
                   'h_bucket{engine="0",le="+Inf"} 4\nh_bucket{engine="1",le="+Inf"} 4\n', "t.prom")
    assert s.series("m")[0].label("a") == 'x"y' and s.total("m") == 3.5
    h = s.histogram("h")
    assert h.buckets == ((1.0, 4.0), (float("inf"), 8.0))
    assert histogram_quantile(0.25, h.buckets) == 0.5 and histogram_quantile(0.75, h.buckets) is None


def test_summarize_matches_linear_interpolation():
    out = summarize([4, 1, 3, 2])
    assert out["p50"] == 2.5 and out["p90"] == pytest.approx(3.7) and out["mean"] == 2.5 and out["min"] == 1


def test_msgpack_offsets_and_concatenation():
    blob = (REAL / "kv_events/vllm_arraylike.msgpack").read_bytes()
    objs = list(decode_all(blob + blob, "x"))
    assert [o for o, _ in objs] == [0, len(blob)] and objs[1][1][0] == 1717000000.5


def test_several_batches_concatenated(tmp_path):
    blob = (REAL / "kv_events/sglang_legacy_arraylike.msgpack").read_bytes()
    path = tmp_path / "two.msgpack"
    path.write_bytes(blob * 2)
    extra = read(path)["run"]["aggregates"]["extra"]
    assert extra["kv_event_batches"] == 2 and extra["kv_blocks_stored"] == 4


def test_several_formats_claiming_a_file_is_an_error(tmp_path):
    from tickgate.gate.detect import detect_format

    reg = registry()
    path = tmp_path / "both.prom"
    path.write_text('vllm:num_requests_running{model_name="m"} 1\nsglang:token_usage{model_name="m"} 0.5\n')
    with pytest.raises(InputError, match=r"several formats \(sglang-metrics, vllm-metrics\)"):
        detect_format(path, reg)
    assert read(path, "sglang-metrics")["run"]["aggregates"]["memory_pressure"] == 0.5


def _cli(*args, env=None):
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "tickgate", *args], capture_output=True, text=True, cwd=REPO,
                          env=full, timeout=120)


def test_normalize_merges_captures_and_is_byte_identical(tmp_path):
    a = "fixtures/realdata/sse/sglang_chat_stream_genai_bench_fixture.sse"
    b = "fixtures/realdata/sse/sglang_0.5_chat_stream_with_usage_chunk.sse"
    outs = []
    for seed in ("0", "123"):
        out = tmp_path / f"obs{seed}.json"
        proc = _cli("normalize", a, b, "--output", str(out), env={"PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    assert [r["request_id"] for r in doc["requests"]] == ["4e28a148aa324b98b91853b724469d91",
                                                          "c7a59cdb72e24ebd99d9821ebc0e4b8a"]
    assert doc["run"]["aggregates"]["total_output_tokens"] == 13 and doc["run"]["provenance"]["format"] == "sglang-sse"


def test_normalize_refuses_merging_aggregate_only_and_writes_nothing(tmp_path):
    out = tmp_path / "obs.json"
    proc = _cli("normalize", "fixtures/realdata/vllm_bench/summary_result_benchmark_serving_2025-05.json",
                "fixtures/realdata/prometheus/vllm_v0_metrics_aibrix_docs_2025-01.prom", "-o", str(out))
    assert proc.returncode == 2 and "aggregates only" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()


def test_plugins_lists_formats_under_their_distribution():
    proc = _cli("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    dist = {(p["kind"], p["name"]): p["distribution"] for p in json.loads(proc.stdout)}
    expected = {"vllm-bench": "tickgate-vllm", "vllm-metrics": "tickgate-vllm", "vllm-sse": "tickgate-vllm",
                "vllm-kv-events": "tickgate-vllm", "sglang-bench": "tickgate-sglang",
                "sglang-metrics": "tickgate-sglang", "sglang-sse": "tickgate-sglang",
                "sglang-kv-events": "tickgate-sglang", "trtllm-bench": "tickgate-trtllm",
                "trtllm-iteration-stats": "tickgate-trtllm", "triton-trtllm-metrics": "tickgate-trtllm",
                "trtllm-metrics": "tickgate-trtllm", "aiperf": "tickgate", "genai-perf": "tickgate",
                "neutral": "tickgate"}
    assert {n: dist[("backend_mirror", n)] for n in expected} == expected
    assert dist[("evidence_parser", "vllm-sse")] == "tickgate-vllm"
