"""Outputs stay byte for byte what they were before JSON and msgpack went through msgspec/orjson.

The digests below were computed at a7aefc2 (before issue 18's library change;
``benchmarks/snapshot_outputs.py`` writes every output of the bundled fixtures
for a full before/after diff); this test re-runs a representative set in-process: reports and traces
of the seed, vLLM, SGLang and TensorRT-LLM mirrors and of admission policies,
imports with four importers, gate reports of a bundle and of benchmark-client
files, normalized KV events and bench results, and a generated Mooncake-like
trace imported and replayed. A difference means a byte changed in an output: find
out why before updating a digest.

The replay reports' digests were updated once since, when reports gained the
``series`` block (issue 23): with that block removed (and the rest written as
``write_json`` does) each report was still the bytes of its a7aefc2 digest.
Issue 32 ("one meaning per figure") changed only throughput figures: replay-vllm's
``latency`` gained ``benchmark_duration_ms`` and ``busy_output_tokens_per_s`` and its
``output_tokens_per_s`` / ``requests_per_s`` are over the client's window (with the old
per-busy-second figures put back, the report is the bytes of its previous digest,
ef88bae...); gate-vllm-clients' throughput signal now leads with the requests/s it
compares and names it (``details.metric``); traces and fingerprints did not change.
The gate reports' digests changed in issue 32 also because each signal's ``evidence`` gained
``recorded_by_neither``, ``inputs`` gained ``inconclusive`` and the default policy's latency
signals moved to 98 % confidence with 1,000 resamples (their intervals, not their decisions).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tickgate.commands.cli import main

ROOT = Path(__file__).resolve().parents[1]

#: (command with {out} for the file it writes, sha256 of that file)
CASES = {
    "replay-default": (["replay", "--input", "fixtures/workload.json", "--policy", "policies/default.yaml",
                        "--output", "{out}", "--quiet"],
                       "3a27701afa03e3e6365a53864c815620301d3e66848b8158b925bd56d4a9b75e"),
    "trace-default": (["replay", "--input", "fixtures/workload.json", "--policy", "policies/default.yaml",
                       "--output", "{other}", "--trace", "{out}", "--quiet"],
                      "b850cbc2d4131ecee3fe1ae8005c3aba639eaaf2f6173e3ad7bb852039b2fac3"),
    # the engine cases run the toy copies of the presets as they were (fixtures/policies/README.md):
    # their traces kept their digests; the vLLM report differs from its earlier digest
    # (ef88baeb...) only in inputs.policy, which names the copy instead of bundled:vllm-v1-bench.yaml
    "replay-vllm": (["replay", "--input", "fixtures/scenarios/kv-pressure.json", "--policy",
                     "fixtures/policies/vllm-v1-toy.yaml", "--output", "{out}", "--quiet"],
                    "d2bee5cc3492b2c5b5216a33f7f8936a8530648be02a52eb7251e0a6ffda48c3"),
    "trace-vllm": (["replay", "--input", "fixtures/scenarios/kv-pressure.json", "--policy",
                    "fixtures/policies/vllm-v1-toy.yaml", "--output", "{other}", "--trace", "{out}", "--quiet"],
                   "dde3f46c4f9436d191a26942489d1ed1d5cfaaff1c42f64bbd0cb09a8a05adee"),
    # trace-sglang: re-pinned when the sglang mirror was rebuilt on SGLang 0.5.23's scheduler
    # (adapters/sglang/tests/test_sglang_conformance.py: step-identical to recordings of the real one)
    "trace-sglang": (["replay", "--input", "fixtures/scenarios/kv-pressure.json", "--policy",
                      "fixtures/policies/sglang-toy.yaml", "--output", "{other}", "--trace", "{out}", "--quiet"],
                     "610701a6a2ea7be2ad8dfddd6bba3d9fb9c1db98add2cc6c7404a6236d8be964"),
    "trace-trtllm": (["replay", "--input", "fixtures/scenarios/kv-pressure.json", "--policy",
                      "fixtures/policies/trtllm-toy-max-utilization.yaml", "--output", "{other}", "--trace", "{out}", "--quiet"],
                     "433e1e87fca4a119fea06795f2fa693b07d76c47e7754299938683fe7f864e9f"),
    "replay-deadline": (["replay", "--input", "fixtures/admission/deadline.json", "--policy",
                         "policies/deadline.yaml", "--output", "{out}", "--quiet"],
                        "b7d26562e9b8ebddd6614d36f22df6349cda1ca57a2340dc1e31994488718467"),
    "trace-deadline": (["replay", "--input", "fixtures/admission/deadline.json", "--policy",
                        "policies/deadline.yaml", "--output", "{other}", "--trace", "{out}", "--quiet"],
                       "40c8cf2536031cf29dc8798c6efdc461909424e6cf76abe4d5badbed959d1c72"),
    "replay-lanes": (["replay", "--input", "fixtures/admission/lanes.json", "--policy", "policies/lanes.yaml",
                      "--output", "{out}", "--quiet"],
                     "9762be95f46875315486b740cbc3fde34875190e29bf458a094b3eba69eb7261"),
    "import-mooncake": (["import", "mooncake", "fixtures/realdata/traces/mooncake_conversation_trace.jsonl",
                         "--output", "{out}", "--quiet"],
                        "c59167f5767c350ca00e996305779428ffba3de69b277ed43044a24b146671d0"),
    "import-azure": (["import", "azure", "fixtures/realdata/traces/AzureLLMInferenceTrace_code.csv",
                      "--output", "{out}", "--quiet"],
                     "f641ab7658ba57d26a61c6b87289fa45dc22128d6de0dd75fe21a342e09cc1c9"),
    "import-splitwise": (["import", "splitwise", "fixtures/realdata/traces/splitwise_sim_test_trace.csv",
                          "--output", "{out}", "--quiet"],
                         "8cc5828f4887af8551715c1c576812aeb1a4098c63e821d73b18d105e5ce9bf5"),
    "import-burstgpt": (["import", "burstgpt", "fixtures/traces/burstgpt_sample.csv", "--output", "{out}",
                         "--quiet"],
                        "ef443a2905248964d4ed7e8284b113075b1cc587c8adab0c40d569a81b9a9a8f"),
    "gate-bundle": (["gate", "--input", "fixtures/gate/p95_regression.json", "--policy",
                     "policies/gate-default.yaml", "--output", "{out}", "--quiet"],
                    "5ca66db662757bc29fa532354ef44ee29ab4e1de54035b3b31aca7d64bf426b2"),
    "gate-release-bad": (["gate", "--input", "fixtures/release_gate_bad.json", "--output", "{out}"],
                         "ec8f56339a0a7ffdf1a0e1710af4a672721b6abcbf011a4a1f26356d4823df18"),
    "gate-vllm-clients": (["gate", "--baseline", "fixtures/realdata/clients/vllm_bench_serve_0.33/vllm_openai_baseline.json",
                           "--candidate",
                           "fixtures/realdata/clients/vllm_bench_serve_0.33/vllm_openai_candidate_slow.json",
                           "--policy", "policies/gate-default.yaml", "--output", "{out}"],
                          "3bbf9fe15e47fa1e8ec5a66f754f7e52907b5b3964099ef937feefc4d7edd4bf"),
    "gate-sglang-clients": (["gate", "--baseline",
                             "fixtures/realdata/clients/sglang_bench_serving_0.5.23/sglang_vllm_baseline.jsonl",
                             "--candidate",
                             "fixtures/realdata/clients/sglang_bench_serving_0.5.23/sglang_vllm_candidate_slow.jsonl",
                             "--policy", "policies/gate-streaming.yaml", "--output", "{out}"],
                            "e1663d27c6c49b657523624cd8e85b78ad37717bcc719fea7985b662435c8540"),
    "kv-vllm-array": (["normalize", "fixtures/realdata/kv_events/vllm_arraylike.msgpack", "-o", "{out}"],
                      "9ec926faa8c0233ad9e00009e7e2fc66616b895a12fbcb524299aea52d808e7e"),
    "kv-vllm-map": (["normalize", "fixtures/realdata/kv_events/vllm_v0.28_map_events.msgpack", "-o", "{out}"],
                    "5540a6013ebed2da27ed9436c1e72dd51188fc30e2f704fd6cfbcb28425894cd"),
    "kv-sglang": (["normalize", "fixtures/realdata/kv_events/sglang_legacy_arraylike.msgpack", "-o", "{out}"],
                  "254b8e89eb1096547715bad1f33358ce5fbafca5f9bafae8de75fba69fd91486"),
    "normalize-vllm-bench": (["normalize", "fixtures/realdata/vllm_bench/summary_result_benchmark_serving_2025-05.json",
                              "-o", "{out}"],
                             "0c671c00caa658a0762fb02bbc6232427d9943bacc119669ff5678c17f1dcdbf"),
    "normalize-sglang-bench": (["normalize", "fixtures/realdata/sglang_bench/h200_llama33_70b_online_output.jsonl",
                                "-o", "{out}"],
                               "114ac74531a2f06dba1130e3b106c328d6138b923323baf35f0d5d70039eba1b"),
}

#: the generated benchmark-like trace: workload lines (header line left out: it names
#: the trace's path) and the traces of a seed and a vLLM replay of it
GENERATED = {
    "workload-body": "b297815f67cb736549a9503acac29f716433d7c4816635f8b4b207d412d3147f",
    "benchmarks/policies/seed-bench.yaml": "cbc8ea3c1a7d7e1e2720fbbc645c9f5c002edfccd322305022057815e3e50dff",
    "fixtures/policies/vllm-v1-toy.yaml": "0f6dad4959c2d4d8b73c1ca196cbe9760275cf86f0be6c3c5bbf96fa56a4d3d1",
}


def _sha(path: Path, skip_first_line: bool = False) -> str:
    data = path.read_bytes()
    if skip_first_line:
        data = data[data.index(b"\n") + 1:]
    return hashlib.sha256(data).hexdigest()


def _bundled(arg: str) -> str:
    """A shipped policy by its installed path: reports name a bundled policy ``bundled:<file>``,
    and outside an editable install ``policies/<file>`` of the checkout is not the bundled copy."""
    from tickgate.util.schemas import data_file

    if arg.startswith("policies/") and arg.count("/") == 1:
        return str(data_file("policies", arg.split("/", 1)[1]))
    return arg


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_bytes_are_unchanged(name, tmp_path, monkeypatch):
    args, digest = CASES[name]
    monkeypatch.chdir(ROOT)  # the reports name their inputs as given
    out, other = tmp_path / "out", tmp_path / "other"
    code = main([_bundled(a.replace("{out}", str(out)).replace("{other}", str(other))) for a in args])
    assert code in (0, 10, 20)
    assert _sha(out) == digest


def test_generated_benchmark_trace_bytes_are_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    trace = tmp_path / "gen.jsonl"
    subprocess.run([sys.executable, str(ROOT / "benchmarks/gen_mooncake.py"), "--n", "3000", "--seed", "1",
                    "--out", str(trace)], check=True)
    workload = tmp_path / "w.json"
    assert main(["import", "mooncake", str(trace), "--block-size", "16", "--output", str(workload), "--quiet"]) == 0
    assert _sha(workload, skip_first_line=True) == GENERATED["workload-body"]
    for policy in ("benchmarks/policies/seed-bench.yaml", "fixtures/policies/vllm-v1-toy.yaml"):
        out = tmp_path / "t.jsonl"
        assert main(["replay", "--input", str(workload), "--policy", _bundled(policy),
                     "--output", str(tmp_path / "r.json"),
                     "--trace", str(out), "--quiet", "--detail-limit", "500"]) == 0
        assert _sha(out) == GENERATED[policy], policy
