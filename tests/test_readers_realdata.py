"""Every engine-output sample in fixtures/realdata normalizes with --format auto,
and the observation carries the values that are in the file."""

from __future__ import annotations

import pytest

from readers_helpers import REAL, read


def test_vllm_bench_summary_2025_05():
    doc = read(REAL / "vllm_bench/summary_result_benchmark_serving_2025-05.json")
    run = doc["run"]
    prov = run["provenance"]
    assert (prov["format"], prov["format_version"], prov["distribution"]) == (
        "vllm-bench", "benchmark_serving-legacy", "tickgate-vllm")
    assert run["model"] == "meta-llama/Llama-3.2-3B-Instruct" and run["label"] == "20250530-203806"
    agg = run["aggregates"]
    assert agg["completed"] == 300 and agg["total_output_tokens"] == 81050
    assert agg["duration_s"] == pytest.approx(36.034275877)
    assert agg["ttft_ms"] == {"mean": 54.577086, "median": 52.999333, "std": 9.271974, "p99": 89.766479}
    assert agg["itl_ms"]["p99"] == pytest.approx(34.210415)
    assert agg["extra"]["request_rate"] == 10.0
    assert prov["metadata"]["deployment"] == "base" and prov["metadata"]["gpu"] == "4xNVIDIA_L40S"
    assert "requests" not in doc


def test_vllm_bench_appended_jsonl_reads_last_run_and_selects_lines():
    path = REAL / "vllm_bench/results_jsonl_appended_nerdalert.jsonl"
    last = read(path)["run"]
    assert last["provenance"]["line"] == 3
    assert last["aggregates"]["extra"]["request_rate"] == "inf"  # the string "inf" in the file
    assert last["aggregates"]["ttft_ms"]["mean"] == pytest.approx(4386.739448)
    first = read(f"{path}#1")["run"]
    assert first["provenance"]["line"] == 1 and first["aggregates"]["total_output_tokens"] == 80945
    assert first["provenance"]["metadata"]["deployment"] == "no-features"


def test_sglang_bench_early_2025_lines():
    path = REAL / "sglang_bench/h200_llama33_70b_online_output.jsonl"
    run = read(f"{path}#2")["run"]
    assert run["provenance"]["format_version"] == "2025-early"
    agg = run["aggregates"]
    assert agg["completed"] == 3200 and agg["total_input_tokens"] == 1629242
    assert agg["latency_ms"] == {"mean": 149037.251471, "median": 159469.042558}
    assert agg["ttft_ms"] == {"median": 614.249972}
    assert agg["extra"]["total_output_tokens_retokenized"] == 1638332


def test_sglang_bench_full_line_mid_2025():
    run = read(REAL / "sglang_bench/sglang_bench_serving_full_line_2025.jsonl")["run"]
    assert run["provenance"]["format"] == "sglang-bench" and run["provenance"]["format_version"] == "2025-mid"
    agg = run["aggregates"]
    assert agg["itl_ms"]["p95"] == pytest.approx(18.839623) and agg["latency_ms"]["p99"] == pytest.approx(9813.896733)
    assert agg["extra"]["concurrency"] == pytest.approx(11.780263008980727)
    assert agg["request_throughput"] == pytest.approx(4.88909229058201)
    assert "accept_length" not in agg["extra"]  # null in the file


def test_sglang_bare_infinity_and_nan(tmp_path):
    line = (REAL / "sglang_bench/sglang_bench_serving_full_line_2025.jsonl").read_text().strip()
    line = line.replace('"request_rate": 5.0', '"request_rate": Infinity').replace(
        '"std_ttft_ms": 65.22224954470558', '"std_ttft_ms": NaN')
    path = tmp_path / "inf.jsonl"
    path.write_text(line + "\n")
    run = read(path)["run"]
    assert run["aggregates"]["extra"]["request_rate"] == "inf"
    assert "std" not in run["aggregates"]["ttft_ms"]
    assert any("std_ttft_ms is nan" in n for n in run["provenance"]["notes"])


def test_vllm_metrics_v0():
    run = read(REAL / "prometheus/vllm_v0_metrics_aibrix_docs_2025-01.prom")["run"]
    assert run["provenance"]["format_version"] == "v0"
    agg = run["aggregates"]
    assert (agg["total_input_tokens"], agg["total_output_tokens"], agg["completed"]) == (148, 955, 4)
    assert agg["preemptions"] == 0 and agg["memory_pressure"] == 0.0
    assert "prefix_cache_hit_rate" not in agg  # -1.0 in the file: prefix caching disabled
    assert any("-1" in n for n in run["provenance"]["notes"])
    assert run["provenance"]["cache_config"] == {"block_size": "16", "num_gpu_blocks": "81767"}


def test_vllm_metrics_v1_histogram_quantiles():
    run = read(REAL / "prometheus/vllm_v1_ttft_hist_scrape_excerpt_smollm2.prom")["run"]
    assert run["provenance"]["format_version"] == "v1" and run["model"] == "smollm2-360m"
    agg = run["aggregates"]
    # 178 observations: rank 89 falls in (0.1, 0.25] holding 129 -> 0.1 + 0.15 * 89/129 s
    assert agg["ttft_ms"]["p50"] == pytest.approx((0.1 + 0.15 * 89 / 129) * 1000, abs=1e-5)
    assert agg["extra"]["engines"] == 1 and agg["total_output_tokens"] == 11392


def test_vllm_metrics_v1_early_excerpt():
    run = read(REAL / "prometheus/vllm_v1_0.8_router_issue_excerpt.prom")["run"]
    assert run["provenance"]["format_version"] == "v1" and run["model"] == "Qwen/Qwen2.5-Coder-32B-Instruct"
    assert run["aggregates"]["memory_pressure"] == 0.0


def test_sglang_metrics_legacy_percent_hit_rate():
    run = read(REAL / "prometheus/sglang_metrics_legacy_2024-11_docs.prom")["run"]
    assert run["provenance"]["format_version"] == "legacy-2024" and run["model"] == "google/gemma-2-9b-it"
    agg = run["aggregates"]
    assert agg["prefix_cache_hit_rate"] == pytest.approx(0.1061)  # 10.61 percent
    assert agg["ttft_ms"]["mean"] == pytest.approx(656.0780844688416 / 2124 * 1000, abs=1e-5)
    assert agg["total_input_tokens"] == 506780 and agg["memory_pressure"] == 0.01


def test_sglang_metrics_2025_fraction_and_trimmed_buckets():
    run = read(REAL / "prometheus/sglang_metrics_2025_docs.prom")["run"]
    agg = run["aggregates"]
    assert run["provenance"]["format_version"] == "2025"
    assert agg["prefix_cache_hit_rate"] == pytest.approx(0.007508)
    assert agg["memory_pressure"] == 0.28 and agg["extra"]["num_queue_reqs"] == 2826
    # most TTFT observations lie past the last published bucket (30 s): no invented p50
    assert "p50" not in agg["ttft_ms"] and agg["ttft_ms"]["mean"] == pytest.approx(213653.519932)


def test_triton_trtllm_metrics():
    run = read(REAL / "prometheus/triton_tensorrtllm_backend_metrics_docs.prom")["run"]
    agg = run["aggregates"]
    assert run["provenance"]["format"] == "triton-trtllm-metrics" and run["model"] == "tensorrt_llm"
    assert agg["memory_pressure"] == 0.4875
    assert agg["extra"]["requests.max"] == 512 and agg["extra"]["kv_cache_blocks.free"] == 6239


def test_trtllm_prefixed_metrics():
    run = read(REAL / "prometheus/trtllm_dynamo_prefixed_metrics_DOC_EXAMPLE.prom")["run"]
    agg = run["aggregates"]
    assert run["provenance"]["format"] == "trtllm-metrics" and agg["completed"] == 155
    assert agg["ttft_ms"] == {"mean": pytest.approx(58.333333)}
    assert agg["extra"]["queue_time_ms.mean"] == pytest.approx(214.0)


def test_trtllm_iteration_stats_executor_json():
    run = read(REAL / "trtllm/iteration_stats_executor_api_2025-04.json")["run"]
    agg = run["aggregates"]
    assert agg["memory_pressure"] == pytest.approx(5495 / 7240, abs=1e-6)
    assert agg["extra"]["max_queued_requests"] == 7 and agg["extra"]["iterations"] == 1


def test_triton_backend_iteration_log():
    run = read(REAL / "trtllm/triton_trtllm_backend_iteration_log_2023-12.txt")["run"]
    assert run["provenance"]["format_version"] == "triton-backend-log"
    assert run["aggregates"]["memory_pressure"] == pytest.approx(1 / 513, abs=1e-6)


def test_trtllm_bench_stdout():
    run = read(REAL / "trtllm/trtllm_bench_throughput_stdout_streaming.txt")["run"]
    assert run["scheduler"] == "GUARANTEED_NO_EVICT" and run["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert run["provenance"]["format_version"] == "stdout (TensorRT-LLM 0.21.0rc0)"
    agg = run["aggregates"]
    assert agg["ttft_ms"]["p95"] == 226.9148 and agg["tpot_ms"]["min"] == 6.645
    assert agg["latency_ms"]["mean"] == 1093.2284 and agg["request_count"] == 100
    assert agg["duration_s"] == pytest.approx(1.1555715)


def test_trtllm_bench_report_json_from_schema(tmp_path):
    """report.json shape (no real file exists: built from the stdout's values)."""
    import json

    report = {"engine": {"model": "meta-llama/Llama-3.1-8B-Instruct", "version": "0.21.0rc0", "backend": "Pytorch"},
              "world_info": {"tp_size": 1, "pp_size": 1, "scheduling_policy": "MAX_UTILIZATION"},
              "request_info": {"num_requests": 100, "avg_num_concurrent_requests": 94.605},
              "performance": {"total_latency_ms": 1155.5715, "request_throughput_req_s": 86.5373,
                              "system_output_throughput_tok_s": 11076.77,
                              "request_latency_percentiles_ms": {"minimum": 1050.1519, "maximum": 1137.6817,
                                                                 "average": 1093.2284, "p50": 1091.7905,
                                                                 "p90": 1130.72, "p95": 1133.0074, "p99": 1137.6817}},
              "streaming_metrics": {"avg_ttft_ms": 162.6706, "ttft_percentiles": {"p95": 226.9148}}}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    run = read(path)["run"]
    assert run["scheduler"] == "MAX_UTILIZATION" and run["aggregates"]["latency_ms"]["p95"] == 1133.0074
    assert run["aggregates"]["ttft_ms"] == {"mean": 162.6706, "p95": 226.9148}


def test_trtllm_serve_docs_example_is_elided_json():
    """The docs example contains a literal '...': a located error, not a crash."""
    from tickgate.util.errors import InputError

    with pytest.raises(InputError) as exc:
        read(REAL / "trtllm/trtllm_serve_metrics_docs_example.json.txt", "trtllm-iteration-stats")
    assert exc.value.line == 18


def test_aiperf_records_jsonl():
    doc = read(REAL / "aiperf_genaiperf_guidellm/aiperf_profile_export.jsonl")
    reqs = {r["request_id"]: r for r in doc["requests"]}
    # keyed by dataset entry (conversation_id:turn_index), not by the per-run x_request_id
    ok = reqs["77aa5b0e-b305-423f-88d5-c00da1892599:0"]
    assert ok["ttft_ms"] == pytest.approx(255.886568) and ok["latency_ms"] == pytest.approx(297.525228)
    assert ok["itl_ms"][0] == 4.898437 and len(ok["itl_ms"]) == 8 and ok["tokens_out"] == 9
    bad = reqs["9526b41d-5dbc-41a5-a353-99ae06a53bc5:0"]
    assert bad["error"].startswith("RequestCancellationError (499)") and bad["tokens_in"] == 550
    assert doc["run"]["aggregates"]["error_rate"] == 0.5


def test_aiperf_summary_json_and_csv_agree():
    js = read(REAL / "aiperf_genaiperf_guidellm/aiperf_profile_export_aiperf.trimmed.json")["run"]
    cs = read(REAL / "aiperf_genaiperf_guidellm/aiperf_profile_export_aiperf.snippet.csv")["run"]
    assert js["provenance"]["format"] == cs["provenance"]["format"] == "aiperf"
    assert js["model"] == "openai/gpt-oss-20b" and js["aggregates"]["failed"] == 84  # 81 + 3 in error_summary
    assert js["aggregates"]["latency_ms"]["p95"] == pytest.approx(8980.84215)
    assert cs["aggregates"]["latency_ms"]["p95"] == 8980.84
    assert js["aggregates"]["request_count"] == cs["aggregates"]["request_count"] == 200
    assert cs["aggregates"]["duration_s"] == 15.2 and cs["aggregates"]["itl_ms"]["p99"] == 55.87


def test_genai_perf_json():
    run = read(REAL / "aiperf_genaiperf_guidellm/genai_perf_24.12_profile_export_genai_perf_streaming.json")["run"]
    assert run["provenance"]["format"] == "genai-perf" and run["backend"] == "tensorrtllm"
    agg = run["aggregates"]
    assert agg["ttft_ms"]["p99"] == pytest.approx(425.029437) and agg["itl_ms"]["mean"] == pytest.approx(2.176734)
    assert agg["output_throughput"] == pytest.approx(44190.560025)
    assert agg["extra"]["output_sequence_length.mean"] == 2565.855


@pytest.mark.parametrize("name, fmt", [("vllm_arraylike.msgpack", "vllm-kv-events"),
                                       ("vllm_v0.28_map_events.msgpack", "vllm-kv-events"),
                                       ("sglang_legacy_arraylike.msgpack", "sglang-kv-events")])
def test_kv_events(name, fmt):
    run = read(REAL / "kv_events" / name)["run"]
    assert run["provenance"]["format"] == fmt
    extra = run["aggregates"]["extra"]
    # decoded_generic.txt: BlockStored [111, 222] with 32 tokens, BlockRemoved [111], AllBlocksCleared
    assert (extra["kv_blocks_stored"], extra["kv_blocks_removed"], extra["kv_tokens_stored"]) == (2, 1, 32)
    assert extra["kv_peak_resident_blocks"] == 2 and extra["kv_resident_blocks_at_end"] == 0
    assert extra["kv_block_size"] == 16 and extra["kv_events_all_blocks_cleared"] == 1


def test_vllm_sse_cut_stream_is_partial_evidence():
    doc = read(REAL / "sse/vllm_v0.5_chat_stream_issue6083.sse")
    (req,) = doc["requests"]
    assert req["request_id"] == "cmpl-840312ff78664572bb504e606140b952" and req["model"] == "Qwen-v"
    st = req["streaming"]
    assert st == {"chunk_count": 6, "complete": False, "finish_reason": None, "timestamps": "none", "token_count": 5}
    assert "output_fingerprint" not in req and "ttft_ms" not in req
    assert doc["run"]["aggregates"]["completed"] == 0


def test_vllm_sse_continuous_usage():
    doc = read(REAL / "sse/vllm_fork_completions_stream_continuous_usage_tt632.sse")
    (req,) = doc["requests"]
    assert req["tokens_in"] == 5 and req["streaming"]["usage"]["total_tokens"] == 6
    assert doc["run"]["provenance"]["format_version"] == "text_completion; continuous-usage"


def test_sglang_sse_usage_on_finish_chunk():
    doc = read(REAL / "sse/sglang_chat_stream_genai_bench_fixture.sse")
    (req,) = doc["requests"]
    assert req["streaming"]["finish_reason"] == "length" and req["streaming"]["complete"] is True
    assert req["tokens_in"] == 5 and req["tokens_out"] == 1
    import hashlib

    assert req["output_fingerprint"] == "sha256:" + hashlib.sha256(b" on").hexdigest()


def test_sglang_sse_separate_usage_chunk():
    doc = read(REAL / "sse/sglang_0.5_chat_stream_with_usage_chunk.sse")
    (req,) = doc["requests"]
    assert doc["run"]["provenance"]["format_version"] == "chat.completion.chunk; separate-usage-chunk"
    assert req["tokens_out"] == 12 and req["streaming"]["chunk_count"] == 3
    assert req["streaming"]["usage"]["reasoning_tokens"] == 13 and req["streaming"]["complete"] is True


def test_sglang_jsonl_chunks_with_reasoning():
    doc = read(REAL / "sse/sglang_kimi_k26_chat_stream_first_chunks.jsonl")
    (req,) = doc["requests"]
    assert "reasoning_content" in doc["run"]["provenance"]["format_version"]
    assert req["streaming"]["token_count"] == 2 and req["streaming"]["complete"] is False
