"""``tickgate timing check --format aiconfigurator-silicon``: measured deployments of the silicon
slice (fixtures/realdata/measured/silicon, rows copied unchanged) replayed as closed loops."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tickgate.testing import run_cli
from tickgate.timing.check import check_points
from tickgate.timing.silicon import read_silicon, resolve_model

SILICON = Path(__file__).resolve().parents[1] / "fixtures" / "realdata" / "measured" / "silicon"
CSV = SILICON / "silicon_dev.csv"
MODELS = SILICON / "models"

#: one row per kind of deployment: vLLM gpt-oss (mxfp4 experts, sliding layers), SGLang DeepSeek-R1
#: (MLA, EP8 on B200), TensorRT-LLM dense Llama, an FP8 export resolved to its base config, an
#: attention-DP x EP16 MiniMax, and a disaggregated row (skipped until PD pools are checked)
ROWS = (
    "2026_03_25_gpt_oss_120b_h100_sxm_vllm_fp4_agg_8192x1024_c4_tp4_0_ep1_0_206",
    "2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c8_tp8_0_ep8_0_248",
    "meta_llama_llama_3_1_8b_instruct_meta_llama_llama_3_1_8b_instruct_h100_sxm_trtllm_agg_1024x256_c8_tp1_epnone_2",
    "nvidia_llama_3_1_8b_instruct_fp8_nvidia_llama_3_1_8b_instruct_fp8_h200_sxm_vllm_agg_1000x100_c112_tp1_epnone_1",
    "minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c64_cfg691",
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c256_cfg375",
)


def _subset(tmp_path: Path, ids: tuple[str, ...] = ROWS) -> Path:
    text = CSV.read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=reader.fieldnames or [], lineterminator="\n")
    writer.writeheader()
    for row in reader:
        if row["id"] in ids:
            writer.writerow(row)
    path = tmp_path / "rows.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def test_the_slice_reads_whole() -> None:
    rows = read_silicon(CSV, MODELS)
    assert len(rows) == 2493
    assert sum(r.data["mode"] == "agg" for r in rows) == 1832


def test_model_paths_resolve_to_the_configs_their_publishers_ship() -> None:
    # the directory names the base checkpoints; exports and tunes share their architecture
    assert resolve_model(MODELS, "openai/gpt-oss-120b")[1].name == "openai--gpt-oss-120b_config.json"
    assert resolve_model(MODELS, "meta-llama/Llama-3.1-8B-Instruct")[1].name == "meta-llama--Meta-Llama-3.1-8B_config.json"
    moe, path, assumed = resolve_model(MODELS, "nvidia/DeepSeek-R1-NVFP4")
    assert moe and path.name == "deepseek-ai--DeepSeek-R1_config.json" and assumed


def test_check_writes_one_line_per_row_and_a_table(tmp_path: Path) -> None:
    out = tmp_path / "pred.jsonl"
    res = run_cli(
        "timing", "check", str(_subset(tmp_path)), "--format", "aiconfigurator-silicon",
        "--models", str(MODELS), "--output", str(out),
    )
    assert res.returncode == 0, res.stderr
    lines = {d["id"]: d for d in map(json.loads, out.read_text().splitlines())}
    assert set(lines) == set(ROWS)
    assert "disaggregated" in lines[ROWS[-1]]["skipped"]
    for row in ROWS[:-1]:
        predicted = lines[row]["predicted"]
        assert set(predicted) == {"ttft_ms", "tpot_ms"} and all(v > 0 for v in predicted.values())
    # the table groups by engine, GPU, dense/MoE, precision, model and mode, then the total
    table = res.stdout.splitlines()
    for grouping, value in (("engine", "sglang"), ("gpu", "b200_sxm"), ("kind", "moe"), ("mode", "disagg")):
        assert any(line.split()[:2] == [grouping, value] for line in table), grouping
    assert table[-1].startswith("total: 10 values from 5 points (1 skipped)")


def test_predictions_are_the_same_bytes_in_every_run(tmp_path: Path) -> None:
    subset = _subset(tmp_path, ROWS[:3])
    outs = []
    for n, seed in enumerate(("0", "4242")):
        out = tmp_path / f"p{n}.jsonl"
        res = run_cli(
            "timing", "check", str(subset), "--format", "aiconfigurator-silicon", "--models", str(MODELS),
            "--output", str(out), env={"PYTHONHASHSEED": seed},
        )
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_a_closed_loop_is_measured_after_warm_up_with_desynchronised_clients() -> None:
    row = next(r for r in read_silicon(CSV, MODELS) if r.id == ROWS[4])
    setup = row.setup(None)
    # 64 clients over 4 attention-DP ranks: one rank's 16 replayed, each with a warm-up request
    assert setup.max_concurrency == 16 and setup.warmup == 16
    starts = [r.arrival_ms for r in setup.requests[:16]]
    assert len(set(starts)) == 16 and starts == sorted(starts)
    [result] = check_points([row])
    assert result.predicted is not None and result.predicted["ttft_ms"] > 0


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("silicon_ttft_ms", "ttft", ":1: not a silicon CSV: no column silicon_ttft_ms"),
        (",388.0431298702206,", ",fast,", ":2: column silicon_ttft_ms: expected a positive number"),
    ],
)
def test_a_malformed_file_is_one_located_error(tmp_path: Path, old: str, new: str, words: str) -> None:
    path = tmp_path / "bad.csv"
    text = "".join(CSV.read_text(encoding="utf-8").splitlines(keepends=True)[:3])
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = run_cli(
        "timing", "check", str(path), "--format", "aiconfigurator-silicon", "--models", str(MODELS),
        "--output", str(out),
    )
    assert res.returncode == 2 and words in res.stderr and str(path) in res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


def test_the_silicon_format_needs_its_model_directory(tmp_path: Path) -> None:
    res = run_cli(
        "timing", "check", str(_subset(tmp_path)), "--format", "aiconfigurator-silicon",
        "--output", str(tmp_path / "o.jsonl"),
    )
    assert res.returncode == 2 and "--models" in res.stderr
