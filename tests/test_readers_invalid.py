"""Hostile variants of every format give one clean, located error (line, column
or JSON path checked exactly; the corpus test checks the CLI line for every file)."""

from __future__ import annotations

import pytest

from readers_helpers import INVALID, read, registry
from tickgate.util.errors import InputError

CASES = [
    ("vllm-bench/truncated.json", {"line": 1, "column": 395}, "invalid JSON"),
    ("vllm-bench/empty.json", {}, "empty file"),
    ("vllm-bench/ttft_not_number.json", {"json_path": "$.mean_ttft_ms"}, 'expected a number, got a string "fast"'),
    ("vllm-bench/completed_string.json", {"json_path": "$.completed"}, "expected a number"),
    ("vllm-bench/arrays_misaligned.json", {"json_path": "$.input_lens"}, "per-request arrays must align"),
    ("vllm-bench/line2_cut.jsonl", {"line": 2}, "invalid JSON"),
    ("vllm-bench/not_an_object.json", {"json_path": "$"}, "expected a JSON object, got an array"),
    ("sglang-bench/truncated.jsonl", {"line": 1}, "invalid JSON"),
    ("sglang-bench/empty.jsonl", {}, "empty file"),
    ("sglang-bench/request_rate_object.jsonl", {"line": 1, "json_path": "$.request_rate"}, "expected a number"),
    ("sglang-bench/negative_ttft.jsonl", {"json_path": "$.ttfts[0]"}, "expected seconds"),
    ("vllm-metrics/bad_value.prom", {"line": 2}, "'lots' is not a number"),
    ("vllm-metrics/unterminated_label.prom", {"line": 1}, "unterminated label value"),
    ("vllm-metrics/empty.prom", {}, "no vllm: metrics"),
    ("sglang-metrics/missing_value.prom", {"line": 2}, "expected a sample value"),
    ("triton-trtllm-metrics/bad_name.prom", {"line": 3, "column": 1}, "expected a metric name"),
    ("vllm-sse/bad_chunk_middle.sse", {"line": 5}, "invalid JSON in stream chunk"),
    ("vllm-sse/choices_not_list.sse", {"json_path": "$.choices"}, "'choices' must be a list"),
    ("vllm-sse/empty.sse", {}, "empty stream capture"),
    ("vllm-sse/chunk_not_object.sse", {"line": 3}, "must be a JSON object"),
    ("sglang-sse/missing_id.sse", {"json_path": "$.id"}, "no string 'id'"),
    ("sglang-sse/content_not_string.jsonl", {"line": 1}, "token text must be a string"),
    ("vllm-kv-events/truncated.msgpack", {}, "ends inside the object that starts at byte 0"),
    ("vllm-kv-events/unknown_event.msgpack", {"json_path": "$.events[2]"}, "unknown event type 'AllBlocksVanishd'"),
    ("vllm-kv-events/empty.msgpack", {}, "empty file"),
    ("vllm-kv-events/hashes_not_list.msgpack", {"json_path": "$.events[0].block_hashes"}, "list of ints or bytes"),
    ("sglang-kv-events/ext_type.msgpack", {}, "ext type 1 at $[1]"),
    ("trtllm-bench/no_performance.json", {"json_path": "$.performance"}, "is required"),
    ("trtllm-bench/latency_string.json", {"json_path": "$.performance.total_latency_ms"}, "expected a number"),
    ("trtllm-iteration-stats/used_exceeds_max.json", {"json_path": "$[0].kvCacheStats.usedNumBlocks"},
     "exceed maxNumBlocks 7240"),
    ("trtllm-iteration-stats/truncated.json", {"line": 1}, "invalid JSON"),
    ("aiperf/bad_unit.jsonl", {"line": 2, "json_path": "$.metrics.time_to_first_token.unit"}, "'fortnights'"),
    ("aiperf/short_row.csv", {"line": 3}, "row has 11 cells, the header has 14"),
    ("genai-perf/latency_array.json", {"json_path": "$.request_latency"}, "expected an object, got an array"),
    ("neutral/bad_version.json", {"json_path": "$.version"}, "1 was expected"),
    # a forced --format on a document with none of the format's defining keys
    ("vllm-bench/unrelated_keys.json", {"json_path": "$"}, "not a vllm-bench file: expected a bench result"),
    ("sglang-bench/unrelated_keys.jsonl", {"line": 1, "json_path": "$"},
     "not a sglang-bench file: expected a bench result"),
    ("aiperf/unrelated_keys.json", {"json_path": "$"}, "not an aiperf file: expected per-request records"),
    ("genai-perf/unrelated_keys.json", {"json_path": "$"},
     "not a genai-perf file: expected a profile_export_genai_perf.json summary"),
    ("trtllm-iteration-stats/unrelated_keys.json", {"line": 1, "json_path": "$"},
     "not a trtllm-iteration-stats file: expected iteration-stats objects"),
    ("trtllm-bench/unrelated_keys.json", {"json_path": "$.performance"},
     "not a trtllm-bench file: expected at least one of total_latency_ms"),
    ("vllm-sse/no_choices.sse", {"line": 1, "json_path": "$"},
     "not a vllm-sse file: expected completion stream chunks with 'id' and 'choices'"),
    ("sglang-sse/no_choices.jsonl", {"line": 1, "json_path": "$"},
     "not a sglang-sse file: expected completion stream chunks with 'id' and 'choices'"),
    # a scrape with the format's prefix but none of the metric families its reader maps
    ("vllm-metrics/unrelated_metrics.prom", {},
     "not a vllm-metrics file: expected a scrape with at least one vllm: metric this reader maps"),
    ("sglang-metrics/unrelated_metrics.prom", {},
     "not a sglang-metrics file: expected a scrape with at least one sglang: metric this reader maps"),
    ("triton-trtllm-metrics/unrelated_metrics.prom", {},
     "not a triton-trtllm-metrics file: expected a scrape with at least one nv_trt_llm_ metric this reader maps"),
    ("trtllm-metrics/unrelated_metrics.prom", {},
     "not a trtllm-metrics file: expected a scrape with at least one trtllm_ metric this reader maps"),
]


@pytest.mark.parametrize("rel, where, message", CASES, ids=[c[0] for c in CASES])
def test_hostile_variant(rel, where, message):
    path = INVALID / rel
    with pytest.raises(InputError) as exc:
        read(path, rel.split("/")[0])
    err = exc.value
    assert err.path == str(path)
    assert message in err.message
    for key, value in where.items():
        assert getattr(err, key) == value, (key, str(err))


def test_cases_agree_with_the_corpus():
    """These cases add the exact location to what tests/test_invalid_corpus.py
    checks for every file in the corpus; both read the same expectation."""
    for rel, _where, message in CASES:
        case = INVALID / rel
        assert case.is_file(), rel
        assert case.with_suffix(".expected").read_text(encoding="utf-8").strip() in message, rel


def test_unknown_file_lists_known_formats():
    with pytest.raises(InputError) as exc:
        read(INVALID / "unknown/plain.txt")
    assert "matches no known format" in exc.value.message
    assert "vllm-bench" in exc.value.message and "trtllm-iteration-stats" in exc.value.message


def test_empty_file_under_auto(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("")
    with pytest.raises(InputError, match="empty file"):
        read(path)


def test_unknown_format_name_names_the_file():
    path = INVALID / "unknown/plain.txt"
    with pytest.raises(InputError) as exc:
        read(path, "vllm-benchmark")
    assert exc.value.path == str(path) and 'unknown format "vllm-benchmark"' in exc.value.message


def test_every_mirror_rejects_unrelated_json_when_forced(tmp_path):
    """``--format NAME`` skips sniffing, so each reader itself must refuse a
    document with none of its defining fields: exit 2, never a run with empty
    aggregates (one JSON object, one JSONL line of it, one JSON array of it)."""
    shapes = {"object.json": '{"hello": "world"}\n', "lines.jsonl": '{"hello": "world"}\n{"status": "ok"}\n',
              "array.json": '[{"hello": "world"}]\n', "empty-object.json": "{}\n"}
    accepted = []
    for fmt in registry().names("backend_mirror"):
        for name, text in shapes.items():
            path = tmp_path / name
            path.write_text(text)
            try:
                doc = read(path, fmt)
            except InputError as exc:
                assert exc.path == str(path), (fmt, name, str(exc))
                continue
            accepted.append((fmt, name, doc["run"].get("aggregates")))
    assert accepted == []


def test_not_this_format_message_names_format_expectation_and_keys(tmp_path):
    path = tmp_path / "h.json"
    path.write_text('{"hello": "world"}')
    with pytest.raises(InputError) as exc:
        read(path, "vllm-bench")
    text = str(exc.value)
    assert text.startswith(f"{path}: $: not a vllm-bench file: expected a bench result: at least one of completed")
    assert "{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms" in text and text.endswith("found keys 'hello'")


def test_gate_with_a_forced_format_fails_on_unrelated_json(tmp_path):
    from conftest import run_cli

    path = tmp_path / "h.json"
    path.write_text('{"hello": "world"}')
    out = tmp_path / "gate.json"
    res = run_cli("gate", "--baseline", str(path), "--candidate", str(path), "--format", "vllm-bench",
                  "--output", str(out))
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "not a vllm-bench file" in res.stderr and not out.exists()
