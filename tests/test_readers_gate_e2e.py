"""`tickgate gate` straight from engine-native files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from readers_helpers import REAL, REPO


def _gate(tmp_path, baseline, candidate):
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "tickgate", "gate", "--baseline", str(baseline),
                           "--candidate", str(candidate), "--output", str(out), "--quiet"],
                          capture_output=True, text=True, cwd=REPO, env=dict(os.environ), timeout=120)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def test_two_vllm_bench_summaries_hold_without_per_request_join(tmp_path):
    proc, report = _gate(tmp_path, REAL / "vllm_bench/summary_result_benchmark_serving_2025-05.json",
                         REAL / "vllm_bench/results_jsonl_appended_nerdalert.jsonl")
    assert proc.returncode == 10, proc.stderr
    assert report["decision"] == "hold"
    text = json.dumps(report["triage"])
    assert "no per-request join was possible" in text


def _detailed(summary_path, ttfts, texts, out):
    """A --save-detailed result: the real summary plus per-request arrays."""
    obj = json.loads(summary_path.read_text())
    n = len(ttfts)
    obj.update(completed=n, failed=0, input_lens=[1000] * n, output_lens=[3] * n, ttfts=ttfts,
               itls=[[0.013, 0.014]] * n, generated_texts=texts, errors=[""] * n,
               start_times=[i * 0.1 for i in range(n)])
    out.write_text(json.dumps(obj))
    return out


def test_two_detailed_vllm_results_join_per_request(tmp_path):
    src = REAL / "vllm_bench/summary_result_benchmark_serving_2025-05.json"
    n = 300
    texts = [f"answer {i}" for i in range(n)]
    base = _detailed(src, [0.050 + (i % 7) * 0.001 for i in range(n)], texts, tmp_path / "base.json")
    same = _detailed(src, [0.050 + (i % 7) * 0.001 for i in range(n)], texts, tmp_path / "cand.json")
    proc, report = _gate(tmp_path, base, same)
    assert report is not None, proc.stderr
    assert "no per-request join was possible" not in json.dumps(report["triage"])
    changed = list(texts)
    changed[17] = "different"
    worse = _detailed(src, [0.050 + (i % 7) * 0.001 for i in range(n)], changed, tmp_path / "worse.json")
    proc, report = _gate(tmp_path, base, worse)
    assert proc.returncode == 20, proc.stderr
    assert report["decision"] == "rollback"


def test_two_sglang_bench_lines(tmp_path):
    lines = (REAL / "sglang_bench/h200_llama33_70b_online_output.jsonl").read_text().splitlines()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(lines[0] + "\n")
    b.write_text(lines[1] + "\n")
    proc, report = _gate(tmp_path, a, b)
    assert proc.returncode == 10, proc.stderr
    assert report["decision"] == "hold"
