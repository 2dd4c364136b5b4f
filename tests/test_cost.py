"""Dollars: price tables, the report's cost section, ``replay --prices`` and ``plan --cost usd``
(docs/report.md, "Cost"; docs/plan.md, "Cost")."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES
from tickgate.cost import PriceTable, ReplicaUsage, cost_section, load_prices, pool_shapes, static_usage
from tickgate.cost.prices import policy_prices
from tickgate.cost.report import recorded_usage
from tickgate.testing import run_cli
from tickgate.timing.gpus import gpu_key
from tickgate.util.errors import InputError, TickgateError
from tickgate.util.locations import load_yaml

HOUR_MS = 3_600_000.0
SHARED = FIXTURES / "scenarios" / "shared-prefix.json"  # 24 timed requests
CLOUD = POLICIES / "prices" / "cloud-2026.yaml"


def table(tmp_path: Path, prices: dict[str, float], name: str = "prices.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"currency": "USD", "date": "2026-01-02", "sources": ["by hand"], "prices": prices}))
    return path


def prices_of(tmp_path: Path, prices: dict[str, float]) -> PriceTable:
    return load_prices(table(tmp_path, prices), gpu_key)


# -- the section, by hand ------------------------------------------------------------------------

def test_two_replicas_of_four_gpus_for_an_hour_and_a_half_at_2_50_cost_30_dollars(tmp_path: Path) -> None:
    usage = [ReplicaUsage("default", f"replica-{i}", "H100", 4, 0.0, 1.5 * HOUR_MS) for i in range(2)]
    section = cost_section(usage, prices_of(tmp_path, {"H100": 2.5}), 1_500_000, 6_000_000)
    assert section["priced"] is True
    assert section["gpu_hours"] == 12.0  # 2 x 4 GPUs x 1.5 h
    assert section["usd"] == 30.0  # 12 GPU-hours x $2.50
    assert section["usd_per_million_output_tokens"] == 20.0  # $30 / 1.5 M
    assert section["usd_per_million_total_tokens"] == 5.0  # $30 / 6 M
    assert section["usd_per_gpu_hour"] == {"H100-SXM-80GB": 2.5}
    assert section["prices"]["date"] == "2026-01-02" and section["prices"]["sources"] == ["by hand"]
    assert section["pools"] == {"default": {
        "replicas": 2, "gpu": ["H100-SXM-80GB"], "gpu_hours": 12.0, "usd": 30.0,
        "usd_per_million_output_tokens": 20.0, "usd_per_million_total_tokens": 5.0}}


def test_pools_are_priced_by_their_own_gpu_and_add_up_to_the_total(tmp_path: Path) -> None:
    """A prefill pool of one L4 for 2 h ($1.00/h) and a decode pool of 2 x 2 H200 for 30 min ($4.00/h):
    $2.00 + 2 x 2 x 0.5 x $4.00 = $2.00 + $8.00; a pool's per-million figure is over the fleet's tokens."""
    usage = [
        ReplicaUsage("prefill", "prefill-0", "L4", 1, 0.0, 2 * HOUR_MS),
        ReplicaUsage("decode", "decode-0", "h200_sxm", 2, 0.0, 0.5 * HOUR_MS),
        ReplicaUsage("decode", "decode-1", "H200", 2, 0.25 * HOUR_MS, 0.75 * HOUR_MS),
    ]
    section = cost_section(usage, prices_of(tmp_path, {"L4": 1.0, "H200": 4.0}), 2_000_000, 4_000_000)
    assert section["usd"] == 10.0 and section["gpu_hours"] == 4.0
    assert section["pools"]["prefill"]["usd"] == 2.0 and section["pools"]["decode"]["usd"] == 8.0
    assert section["pools"]["decode"]["usd_per_million_output_tokens"] == 4.0  # $8 / 2 M
    assert section["pools"]["decode"]["gpu"] == ["H200-SXM-141GB"]  # two names, one GPU
    assert list(section["pools"]) == ["decode", "prefill"]


def test_the_section_does_not_depend_on_the_order_of_the_records(tmp_path: Path) -> None:
    prices = prices_of(tmp_path, {"H100": 2.99, "B200": 6.03})
    usage = [ReplicaUsage(f"p{i % 3}", f"r{i}", "H100" if i % 2 else "B200", 1 + i % 4, i * 0.1, 1000.0 + i * 7.3)
             for i in range(200)]
    first = cost_section(usage, prices, 12_345, 67_890)
    for seed in range(5):
        shuffled = list(usage)
        random.Random(seed).shuffle(shuffled)
        assert cost_section(shuffled, prices, 12_345, 67_890) == first


def test_without_prices_the_section_has_gpu_hours_only() -> None:
    usage = [ReplicaUsage("default", "replica-0", "", 2, 0.0, HOUR_MS)]
    section = cost_section(usage, None, 10, 20)
    assert section["priced"] is False and section["gpu_hours"] == 2.0
    assert not any(key.startswith("usd") for key in section) and "prices" not in section
    assert section["pools"]["default"] == {"replicas": 1, "gpu": [""], "gpu_hours": 2.0}


def test_no_tokens_served_leaves_the_per_million_figures_null(tmp_path: Path) -> None:
    usage = [ReplicaUsage("default", "replica-0", "H100", 1, 0.0, HOUR_MS)]
    section = cost_section(usage, prices_of(tmp_path, {"H100": 3.0}), 0, 0)
    assert section["usd"] == 3.0 and section["usd_per_million_output_tokens"] is None


def test_a_gpu_the_table_does_not_price_is_an_error_naming_the_gpu_and_the_table(tmp_path: Path) -> None:
    usage = [ReplicaUsage("decode", "decode-0", "B200", 1, 0.0, HOUR_MS)]
    with pytest.raises(InputError) as info:
        cost_section(usage, prices_of(tmp_path, {"H100": 3.0}), 1, 1)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'prices.json'}:1:")
    assert "$.prices: no price for GPU B200 (B200-SXM-180GB), used by pool 'decode'" in message
    assert "the table prices H100" in message


def test_a_replica_usage_refuses_an_interval_that_runs_backwards() -> None:
    with pytest.raises(ValueError, match="before start_ms"):
        ReplicaUsage("p", "r", "H100", 1, 10.0, 5.0)


# -- tables --------------------------------------------------------------------------------------

def test_names_resolve_through_the_catalogue_aliases(tmp_path: Path) -> None:
    prices = prices_of(tmp_path, {"H100": 2.0, "b200_sxm": 5.0})
    assert prices.price("h100_sxm", "x") == prices.price("H100-SXM-80GB", "x") == 2.0
    assert prices.price("B200", "x") == 5.0


@pytest.mark.parametrize(("prices", "where", "what"), [
    ({"Z900": 1.0}, "$.prices.Z900", "unknown GPU 'Z900'"),
    ({"H100": 1.0, "h100_sxm": 2.0}, "$.prices.h100_sxm", "h100_sxm is H100-SXM-80GB, already priced as H100"),
    ({"H100": 0}, "$.prices.H100", "0 is less than or equal to the minimum of 0"),
    ({}, "$.prices", "should be non-empty"),
])
def test_a_bad_table_is_one_located_line(tmp_path: Path, prices: dict[str, float], where: str, what: str) -> None:
    with pytest.raises(InputError) as info:
        prices_of(tmp_path, prices)
    assert info.value.json_path == where and info.value.line is not None
    assert what in info.value.message


def test_the_shipped_table_loads_and_says_where_its_prices_come_from() -> None:
    prices = load_prices(CLOUD, gpu_key)
    for gpu in ("H100", "H200", "B200", "GB200", "A100-SXM4-80GB", "L4", "MI300X"):
        assert prices.price(gpu, "test") > 0
    assert len(prices.sources) >= 6 and all("http" in s for s in prices.sources)


def test_a_policy_carries_its_table_under_prices(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nprices:\n  currency: USD\n  date: '2026-01-02'\n  prices: {H100: -2}\n")
    data, locations = load_yaml(path)
    with pytest.raises(InputError) as info:
        policy_prices(data, locations, path, gpu_key)
    assert str(info.value).startswith(f"{path}:5:")
    assert info.value.json_path == "$.prices.prices.H100"


# -- shapes --------------------------------------------------------------------------------------

def test_a_replica_takes_tp_x_pp_x_attention_dp_x_data_parallel_gpus() -> None:
    doc = {"timing": {"name": "roofline", "options": {"gpu": "H200", "tensor_parallel_size": 2,
                                                      "pipeline_parallel_size": 2, "attention_dp_size": 2}},
           "cluster": {"pools": {"a": {"replicas": 3, "data_parallel_size": 2}, "b": {"replicas": 1}}}}
    shapes = pool_shapes(doc)
    assert [(s.pool, s.replicas, s.gpu, s.gpus_per_replica) for s in shapes] == [("a", 3, "H200", 16), ("b", 1, "H200", 8)]
    usage = static_usage(doc, 100.0)
    assert [u.replica for u in usage] == ["a-0", "a-1", "a-2", "b-0"]
    assert static_usage({}, 5.0) == [ReplicaUsage("default", "replica-0", "", 1, 0.0, 5.0)]


def test_a_fleet_that_scales_is_billed_replica_by_replica_from_its_report() -> None:
    doc = {"timing": {"name": "roofline", "options": {"gpu": "H100", "tensor_parallel_size": 2}},
           "cluster": {"replicas": 1}}
    report = {"autoscaling": {"replicas": [
        {"replica": "replica-0", "pool": "default", "start_s": 0.0, "ready_s": 0.0, "drain_s": None, "stop_s": 7.5},
        {"replica": "replica-1", "pool": "default", "start_s": 2.0, "ready_s": 4.0, "drain_s": 6.0, "stop_s": 6.5},
    ]}}
    usage = recorded_usage(report, doc)
    assert usage == [ReplicaUsage("default", "replica-0", "H100", 2, 0.0, 7500.0),
                     ReplicaUsage("default", "replica-1", "H100", 2, 2000.0, 6500.0)]
    assert recorded_usage({"fleet": {}}, doc) is None


# -- tickgate replay --prices ------------------------------------------------------------------

def test_replay_prices_a_static_fleet_from_zero_to_its_last_finish(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = run_cli("replay", "--input", str(SHARED), "--policy", str(POLICIES / "fleet-pd.yaml"),
                     "--prices", str(CLOUD), "--output", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    cost = report["cost"]
    end_ms = max(o["finished_ms"] for o in report["outcomes"])
    gpus = 4  # 1 prefill + 3 decode replicas of one H100 each
    assert cost["usage"] == "static" and cost["priced"] is True
    assert cost["gpu_hours"] == pytest.approx(gpus * end_ms / HOUR_MS, abs=2e-6)
    assert cost["usd"] == pytest.approx(cost["gpu_hours"] * 2.99, abs=2e-6)
    completed = [o for o in report["outcomes"] if o["status"] == "completed"]
    assert cost["output_tokens"] == sum(o["output_tokens"] for o in completed)
    assert cost["total_tokens"] == sum(o["output_tokens"] + o["prompt_tokens"] for o in completed)
    assert cost["prices"]["origin"] == str(CLOUD)
    assert "cost: " in result.stdout and "static usage" in result.stdout


def test_the_prices_flag_wins_over_the_policys_table(tmp_path: Path) -> None:
    doc, _ = load_yaml(POLICIES / "fleet-round-robin.yaml")
    doc["prices"] = {"currency": "USD", "date": "2025-01-01", "prices": {"H100": 1.0}}
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(doc))
    own, flagged = tmp_path / "own.json", tmp_path / "flagged.json"
    assert run_cli("replay", "--input", str(SHARED), "--policy", str(policy), "--output", str(own)).returncode == 0
    assert run_cli("replay", "--input", str(SHARED), "--policy", str(policy), "--prices",
                   str(table(tmp_path, {"H100": 2.0})), "--output", str(flagged)).returncode == 0
    mine, theirs = json.loads(own.read_text())["cost"], json.loads(flagged.read_text())["cost"]
    assert mine["prices"]["origin"] == f"{policy} $.prices" and mine["usd_per_gpu_hour"] == {"H100-SXM-80GB": 1.0}
    assert theirs["prices"]["origin"] == str(tmp_path / "prices.json")
    assert theirs["usd"] == pytest.approx(2 * mine["usd"], abs=2e-6)


@pytest.mark.parametrize(("prices", "expected"), [
    ({"Z900": 1.0}, "prices.json:1:{col}: $.prices.Z900: unknown GPU 'Z900'"),
    ({"B200": 1.0}, "prices.json:1:{col}: $.prices: no price for GPU H100-SXM-80GB, used by pool 'default'"),
])
def test_replay_refuses_a_bad_table_before_running_and_writes_nothing(
    tmp_path: Path, prices: dict[str, float], expected: str
) -> None:
    out = tmp_path / "report.json"
    path = table(tmp_path, prices)
    result = run_cli("replay", "--input", str(SHARED), "--policy", str(POLICIES / "fleet-round-robin.yaml"),
                     "--prices", str(path), "--output", str(out))
    assert result.returncode == 2 and not out.exists()
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    head, _, rest = expected.partition("{col}")
    assert line.startswith(f"error: {tmp_path}/{head}") and rest in line


def test_replay_without_timing_cannot_be_priced(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--prices", str(CLOUD), "--output", str(out))
    assert result.returncode == 2 and not out.exists()
    assert "the policy has no timing section, and cost is GPUs x time" in result.stderr


# -- tickgate plan --cost usd ------------------------------------------------------------------

BASE = """version: 1
scheduler:
  name: vllm-v1
  options: {block_size: 16, num_gpu_blocks: auto, max_num_seqs: 64, max_num_batched_tokens: 2048,
            enable_chunked_prefill: true, enable_prefix_caching: true, policy: fcfs}
timing:
  name: roofline
  options: {model: meta-llama/Llama-3.1-8B-Instruct, gpu: H100, tensor_parallel_size: 1, engine: vllm}
"""


def plan(tmp_path: Path, out: Path, *args: str) -> object:
    policy = tmp_path / "base.yaml"
    policy.write_text(BASE)
    return run_cli("plan", "--workload", str(SHARED), "--policy", str(policy), "--slo", "itl_p50_ms=50",
                   "--vary", "timing.options.gpu=H100,L4", "--vary", "timing.options.tensor_parallel_size=1,2",
                   *args, "--output", str(out))


def test_plan_cost_usd_chooses_two_cheap_gpus_over_one_dear_one(tmp_path: Path) -> None:
    """At $10/h an H100 and $1/h an L4: one H100 meets the ITL SLO, one L4 is too slow
    (bandwidth), two L4s meet it; the fewest GPUs would be the H100, the fewest dollars are the L4s."""
    out = tmp_path / "plan.json"
    result = plan(tmp_path, out, "--cost", "usd", "--prices", str(table(tmp_path, {"H100": 10.0, "L4": 1.0})))
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    data = json.loads(out.read_text())
    met = [e for e in data["evidence"] if e["met"]]
    fewest_gpus = min(met, key=lambda e: e["cost"]["gpus"])
    assert fewest_gpus["values"]["timing.options.gpu"] == "H100" and fewest_gpus["cost"]["gpus"] == 1
    recommended = data["recommendation"]
    assert recommended["values"] == {"timing.options.gpu": "L4", "timing.options.tensor_parallel_size": 2}
    assert recommended["cost"]["gpus"] == 2 and recommended["cost"]["usd_per_hour"] == 2.0
    chosen = next(e for e in data["evidence"] if e["run"] == recommended["run"])
    missed = next(e for e in data["evidence"] if e["values"] == {"timing.options.gpu": "L4",
                                                                 "timing.options.tensor_parallel_size": 1})
    assert not missed["met"]
    # USD per million output tokens from the replay's output throughput
    assert data["question"]["cost"] == "usd" and data["question"]["prices"]["date"] == "2026-01-02"
    assert chosen["cost"]["usd_per_million_output_tokens"] > 0
    assert "$/h" in result.stdout and "$2.00/h" in result.stdout  # type: ignore[attr-defined]


def test_plan_usd_per_million_output_tokens_is_dollars_over_the_replays_throughput(tmp_path: Path) -> None:
    from tickgate.plan.pricing import entry_cost

    prices = prices_of(tmp_path, {"H100": 3.6})
    doc = {"timing": {"name": "roofline", "options": {"gpu": "H100", "tensor_parallel_size": 2}}, "cluster": {"replicas": 3}}
    cost = entry_cost(doc, prices, {"output_tokens_per_s": 1000.0})
    # 6 GPUs x $3.60 = $21.60/h; 3.6 M output tokens an hour -> $6.00 per million
    assert cost == {"gpus": 6, "usd_per_hour": 21.6, "usd_per_million_output_tokens": 6.0}
    assert entry_cost(doc, prices, None)["usd_per_million_output_tokens"] is None


def test_plan_refuses_to_count_gpus_of_different_kinds(tmp_path: Path) -> None:
    """Without prices a plan over H200 and H100 once recommended the first of equal GPU counts."""
    out = tmp_path / "plan.json"
    result = plan(tmp_path, out)
    assert result.returncode == 2 and not out.exists()  # type: ignore[attr-defined]
    assert result.stderr.strip() == (  # type: ignore[attr-defined]
        "error: --cost gpus: the configurations mix GPU kinds (H100-SXM-80GB, L4-24GB) and a GPU count does "
        "not compare across kinds; plan with --cost usd and --prices FILE (e.g. policies/prices/cloud-2026.yaml)")


@pytest.mark.parametrize(("args", "expected"), [
    (("--cost", "usd"), "error: --cost usd: no prices: give --prices FILE"),
    (("--cost", "usd", "--prices", "{prices}"), "$.prices: no price for GPU L4 (L4-24GB), used by pool 'default' "
                                                "with timing.options.gpu=\"L4\""),
])
def test_plan_cost_usd_needs_a_price_for_every_configuration(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    out = tmp_path / "plan.json"
    path = table(tmp_path, {"H100": 3.0})
    result = plan(tmp_path, out, *(a.format(prices=path) for a in args))
    assert result.returncode == 2 and not out.exists()  # type: ignore[attr-defined]
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1  # type: ignore[attr-defined]


def test_check_priced_refuses_a_pool_without_a_gpu_name(tmp_path: Path) -> None:
    from tickgate.cost.report import check_priced

    with pytest.raises(TickgateError, match="pool 'default' names no GPU"):
        check_priced({"timing": {"name": "linear", "options": {}}}, prices_of(tmp_path, {"H100": 1.0}))


def test_replay_bills_a_fleet_that_scales_by_its_replicas_lives(tmp_path: Path) -> None:
    doc, _ = load_yaml(POLICIES / "fleet-least-loaded.yaml")
    doc["cluster"] = {"replicas": 1, "router": {"name": "least-loaded"},
                      "autoscaler": {"name": "hpa", "max_replicas": 4,
                                     "options": {"metrics": [{"name": "running", "target": 2}]}}}
    policy = tmp_path / "scaled.json"
    policy.write_text(json.dumps(doc))
    out = tmp_path / "report.json"
    result = run_cli("replay", "--input", str(SHARED), "--policy", str(policy), "--prices", str(CLOUD),
                     "--output", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    lives = report["autoscaling"]["replicas"]
    assert report["cost"]["usage"] == "recorded"
    assert report["cost"]["gpu_hours"] == pytest.approx(sum(r["stop_s"] - r["start_s"] for r in lives) / 3600, abs=2e-6)
