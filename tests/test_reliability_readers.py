"""Hostile bytes for every reader (hypothesis): a real sample of each format,
truncated at a random byte, with random bytes overwritten, or (for JSON-shaped
formats) with keys dropped and values swapped for other types, must read as a
value or fail with a :class:`TickgateError` -- never another exception.

Covered: every backend mirror (read through ``read_observations``, the path
``tickgate normalize`` takes, and through the gate's ``read_side``), every
workload reader (importer) drained to the end, and gate bundles. Everything
runs in-process with a bounded number of examples so the suite stays fast.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from readers_helpers import registry as reader_registry
from tickgate.util.errors import TickgateError
from tickgate.interfaces.model import Request

REAL = FIXTURES / "realdata"
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: backend mirror -> a real sample of its format
MIRROR_SAMPLES: dict[str, Path] = {
    "aiperf": REAL / "aiperf_genaiperf_guidellm/aiperf_profile_export.jsonl",
    "genai-perf": REAL / "aiperf_genaiperf_guidellm/genai_perf_24.12_profile_export_genai_perf_streaming.json",
    "sglang-bench": REAL / "sglang_bench/sglang_bench_serving_full_line_2025.jsonl",
    "sglang-kv-events": REAL / "kv_events/sglang_legacy_arraylike.msgpack",
    "sglang-metrics": REAL / "prometheus/sglang_metrics_2025_docs.prom",
    "sglang-sse": REAL / "sse/sglang_0.5_chat_stream_with_usage_chunk.sse",
    "triton-trtllm-metrics": REAL / "prometheus/triton_tensorrtllm_backend_metrics_docs.prom",
    "trtllm-bench": REAL / "trtllm/trtllm_bench_throughput_stdout_streaming.txt",
    "trtllm-iteration-stats": REAL / "trtllm/iteration_stats_executor_api_2025-04.json",
    "trtllm-metrics": REAL / "prometheus/trtllm_dynamo_prefixed_metrics_DOC_EXAMPLE.prom",
    "vllm-bench": REAL / "vllm_bench/summary_result_benchmark_serving_2025-05.json",
    "vllm-kv-events": REAL / "kv_events/vllm_arraylike.msgpack",
    "vllm-metrics": REAL / "prometheus/vllm_v1_ttft_hist_scrape_excerpt_smollm2.prom",
    "vllm-sse": REAL / "sse/vllm_v0.5_chat_stream_issue6083.sse",
    "tickgate-replay": FIXTURES / "replay-reports/report.json",
}
#: workload reader -> (sample, lines kept: the real traces are megabytes)
TRACE_SAMPLES: dict[str, tuple[Path, int]] = {
    "mooncake": (REAL / "traces/mooncake_conversation_trace.jsonl", 12),
    "azure": (REAL / "traces/AzureLLMInferenceTrace_code.csv", 12),
    "burstgpt": (FIXTURES / "traces/burstgpt_sample.csv", 12),
    "splitwise": (REAL / "traces/splitwise_sim_test_trace.csv", 12),
    # benchmark-client runs (tickgate.client_runs): whole files of one JSON document or line, or 12 records
    "vllm-bench": (REAL / "clients/vllm_bench_serve_0.33/vllm_openai_baseline.json", 1),
    "sglang-bench": (REAL / "clients/sglang_bench_serving_0.5.23/sglang_vllm_baseline.jsonl", 1),
    "aiperf": (REAL / "clients/aiperf_0.13/aiperf_chat_baseline/profile_export.jsonl", 12),
    "genai-perf": (REAL / "clients/genai_perf_0.0.16/genaiperf_chat_baseline/mock-model-openai-chat-request_rate8.0/"
                   "profile_export.json", 1),
}
SWAPS: list[Any] = [None, "x", "", [], {}, -1, 0, 1.5, 10**30, -(10**30), 1e308, True, math.nan, math.inf,
                    [1, "a"], {"k": None}]


def head_lines(path: Path, n: int) -> bytes:
    with path.open("rb") as fh:
        return b"".join(fh.readline() for _ in range(n))


def neutral_sample() -> bytes:
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    doc = bundle["baseline"]
    doc["requests"] = doc["requests"][:4]
    return json.dumps(doc, indent=1).encode()


def bundle_sample() -> bytes:
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    for side in ("baseline", "candidate"):
        bundle[side]["requests"] = bundle[side]["requests"][:3]
    return json.dumps(bundle, indent=1).encode()


# -- mutations -----------------------------------------------------------------------

def _mutate_value(value: Any, rnd: random.Random) -> Any:
    """Drop a key or swap a value somewhere inside a JSON value."""
    if isinstance(value, dict) and value:
        key = rnd.choice(sorted(value))
        out = dict(value)
        action = rnd.random()
        if action < 0.3:
            del out[key]
        elif action < 0.6:
            out[key] = rnd.choice(SWAPS)
        else:
            out[key] = _mutate_value(out[key], rnd)
        return out
    if isinstance(value, list) and value:
        i = rnd.randrange(len(value))
        out = list(value)
        action = rnd.random()
        if action < 0.2:
            del out[i]
        elif action < 0.5:
            out[i] = rnd.choice(SWAPS)
        else:
            out[i] = _mutate_value(out[i], rnd)
        return out
    return rnd.choice(SWAPS)


def mutate_json(data: bytes, rnd: random.Random) -> bytes | None:
    """Structural mutation of a JSON document or of one line of a JSON-lines
    file (SSE ``data:`` lines included); None when the sample is not JSON."""
    text = data.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
    except ValueError:
        lines = text.splitlines(keepends=True)
        candidates = [i for i, line in enumerate(lines) if line.removeprefix("data:").strip().startswith(("{", "["))]
        if not candidates:
            return None
        i = rnd.choice(candidates)
        prefix = "data: " if lines[i].startswith("data:") else ""
        try:
            value = json.loads(lines[i].removeprefix("data:"))
        except ValueError:
            return None
        lines[i] = prefix + json.dumps(_mutate_value(value, rnd)) + "\n"
        return "".join(lines).encode()
    return json.dumps(_mutate_value(doc, rnd)).encode()


@st.composite
def mutated(draw: Any, sample: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "structure", "structure", "insert"]))
    if kind == "truncate":
        return sample[: draw(st.integers(0, max(len(sample) - 1, 0)))]
    if kind == "flip":
        data = bytearray(sample)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "insert":
        at = draw(st.integers(0, len(sample)))
        junk = draw(st.sampled_from([b"NaN", b"Infinity", b"-1e400", b"1" * 40, b"\xff\xfe", b"\x00", b'"',
                                     b"[" * 2000, b"{", b"\n\n", b"}", b"\xc3"]))
        return sample[:at] + junk + sample[at:]
    out = mutate_json(sample, draw(st.randoms(use_true_random=False)))
    return sample[: len(sample) // 2] if out is None else out


def survives(fn: Callable[[Path], Any], data: bytes, suffix: str) -> Any:
    """Run ``fn`` on ``data`` written to a file; anything but a value or a
    TickgateError fails the test (pytest shows the exception and the input)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"case{suffix}"
        path.write_bytes(data)
        try:
            return fn(path)
        except TickgateError as exc:
            assert str(exc).strip() and "\n" not in str(exc).strip(), repr(str(exc))
            return exc


# -- backend mirrors -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", sorted(MIRROR_SAMPLES))
def test_backend_mirror_survives_mutations(fmt: str) -> None:
    from tickgate.gate.detect import read_observations

    reg = reader_registry()
    sample_path = MIRROR_SAMPLES[fmt]
    sample = sample_path.read_bytes()
    assert isinstance(read_observations(sample_path, fmt, reg), dict)  # the sample itself reads

    @FUZZ
    @given(mutated(sample))
    def check(data: bytes) -> None:
        result = survives(lambda p: read_observations(p, fmt, reg), data, sample_path.suffix)
        if isinstance(result, dict):
            json.dumps(result, allow_nan=False)  # what was read can be written

    check()


def test_every_backend_mirror_is_fuzzed() -> None:
    """neutral has its own test below."""
    assert sorted(MIRROR_SAMPLES) == [n for n in reader_registry().names("backend_mirror") if n != "neutral"]


@FUZZ
@given(mutated(neutral_sample()))
def test_neutral_observations_survive_mutations_on_both_paths(data: bytes) -> None:
    from tickgate.gate.inputs import read_side
    from tickgate.gate.detect import read_observations

    reg = reader_registry()
    survives(lambda p: read_observations(p, "neutral", reg), data, ".json")
    survives(lambda p: read_side(p, "baseline", "neutral", registry=reg), data, ".json")


@pytest.mark.parametrize("fmt", ["vllm-bench", "sglang-sse", "trtllm-iteration-stats", "vllm-metrics"])
def test_gate_side_survives_mirror_mutations(fmt: str) -> None:
    """The gate's own reading path (auto-detection, then the plugin-data check)."""
    from tickgate.gate.inputs import read_side

    reg = reader_registry()
    sample_path = MIRROR_SAMPLES[fmt]

    @settings(FUZZ, max_examples=10)
    @given(mutated(sample_path.read_bytes()))
    def check(data: bytes) -> None:
        survives(lambda p: read_side(p, "candidate", "auto", registry=reg), data, sample_path.suffix)

    check()


# -- gate bundles ----------------------------------------------------------------------

@settings(FUZZ, max_examples=40)
@given(mutated(bundle_sample()))
def test_gate_bundle_survives_mutations(data: bytes) -> None:
    from tickgate.gate.inputs import read_bundle

    survives(read_bundle, data, ".json")


# -- workload readers (importers) -------------------------------------------------------

@pytest.mark.parametrize("fmt", sorted(TRACE_SAMPLES))
def test_workload_reader_survives_mutations(fmt: str) -> None:
    from tickgate.host.registry import get_registry

    reader_cls = get_registry().get("workload_reader", fmt).obj
    sample_path, lines = TRACE_SAMPLES[fmt]
    sample = head_lines(sample_path, lines)

    def drain(path: Path) -> list[Request]:
        out = list(reader_cls().read(path, {}))
        assert all(type(r) is Request for r in out)
        return out

    assert len(survives(drain, sample, sample_path.suffix)) > 0  # the unmutated head reads

    @FUZZ
    @given(mutated(sample))
    def check(data: bytes) -> None:
        survives(drain, data, sample_path.suffix)

    check()


def test_every_workload_reader_is_fuzzed() -> None:
    from tickgate.host.registry import get_registry

    assert sorted(TRACE_SAMPLES) == get_registry().names("workload_reader")
