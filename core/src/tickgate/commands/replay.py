"""``tickgate replay``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..util.atomic import check_distinct_outputs, write_json
from ..util.words import plural


@click.command("replay")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Workload JSON (or a trace, with --input-format).",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the replay report (JSON, written atomically).",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Policy YAML (default: the bundled policies/default.yaml).",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write every tick record as JSON lines.",
)
@click.option(
    "--kv-events",
    "kv_events_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the scheduler's KV-cache events as vLLM KVEventBatch msgpack (docs/vllm.md, "
    '"KV events"); the report gets a kv_events block.',
)
@click.option(
    "--input-format",
    default="workload",
    show_default=True,
    help="'workload' or the name of a workload reader (see `tickgate plugins`).",
)
@click.option(
    "--block-size",
    type=click.IntRange(1, 65536),
    default=None,
    help="Prefix-block size for trace formats (a workload file carries its own).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Replay only the first N requests.")
@click.option(
    "--detail-limit",
    type=click.IntRange(min=0),
    default=10_000,
    show_default=True,
    help="Keep at most this many tick records and request outcomes in the report.",
)
@click.option(
    "--prices",
    "prices_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A price table (USD per GPU-hour by GPU kind, YAML or JSON; e.g. policies/prices/cloud-2026.yaml): "
    'the report gets a cost section (docs/report.md, "Cost"). Wins over the policy\'s prices: section, '
    "which adds the section too.",
)
@click.option("--quiet", is_flag=True, help="Do not print the summary (nor progress on a terminal).")
def replay_command(
    input_path: Path,
    output_path: Path,
    policy_path: Path | None,
    trace_path: Path | None,
    kv_events_path: Path | None,
    input_format: str,
    block_size: int | None,
    limit: int | None,
    detail_limit: int,
    prices_path: Path | None,
    quiet: bool,
) -> None:
    """Replay a workload through the policy's scheduler and write a report."""
    from ..host.policy import load_policy
    from ..parallel.switch import helpers_wanted
    from ..simulate import replay
    from ..util.errors import InputError
    from ..util.progress import progress
    from ..workload.sources import open_requests

    if block_size is not None and input_format == "workload":
        raise InputError(
            input_path,
            "--block-size applies to trace formats (--input-format); a workload "
            "file gives its prefix block size in its header (block_size)",
        )
    outputs = {"--output": output_path, "--trace": trace_path, "--kv-events": kv_events_path}
    check_distinct_outputs(outputs, {"--input": input_path, "--policy": policy_path, "--prices": prices_path})
    policy = load_policy(policy_path)
    prices, usage = _prices(policy, prices_path)  # before the replay: a bad table wastes none
    helpers = helpers_wanted(input_path)  # docs/workload.md, "Large replays"
    requests, inputs = open_requests(
        input_path, input_format, block_size=block_size, limit=limit, prefetch=helpers
    )
    with progress("replay", unit=" requests", quiet=quiet) as bar:  # arrivals, on a terminal only
        report = replay(
            bar.counted(requests),
            policy,
            trace_path=trace_path,
            inputs=inputs,
            detail_limit=detail_limit,
            sidecar=helpers,
            kv_events_path=kv_events_path,
            extra_sinks=[usage] if usage is not None else (),
        )
    if usage is not None:
        from ..cost.report import replay_cost

        report["cost"] = replay_cost(report, policy.data, prices, usage)
    write_json(output_path, report)
    if not quiet and "fleet" in report:
        from ..fleet.spec import fleet_shape

        s, lat = report["summary"], report["latency"]
        ttft = (lat.get("ttft_ms") or {}).get("p50")
        # the router chooses only among replicas: a single one's data-parallel ranks are balanced
        # by the engine's own load balancer
        router = f" ({report['fleet']['routing']['router']})" if s["replicas"] > 1 else ""
        shape = fleet_shape(report["inputs"]["cluster"]["pools"])
        scaled = report.get("autoscaling")
        if scaled is not None:  # the starting shape, then what the autoscaler made of it
            peaks = ", ".join(f"{pool} {n}" for pool, n in scaled["peak_replicas"].items())
            shape = f"{shape} at the start, scaled by {scaled['name']} (peak: {peaks})"
        click.echo(
            f"replayed {plural(s['request_count'], 'request')} on "
            f"{shape}{router}: {s['completed_requests']} completed, "
            f"{report['requests']['rejected']} rejected; prefix-cache hit rate "
            f"{report['fleet']['prefix_cache_hit_rate']}, TTFT p50 {ttft} ms; "
            f"fingerprint {s['trace_fingerprint']} -> {output_path}"
        )
    elif not quiet:
        s = report["summary"]
        click.echo(
            f"replayed {plural(s['request_count'], 'request')} in {plural(s['total_ticks'], 'tick')}: "
            f"{s['completed_requests']} completed, {report['requests']['rejected']} rejected; "
            f"peak KV {plural(s['peak_kv_pages'], 'page')} ({s['peak_kv_pressure_pct']}%), "
            f"decode utilisation {s['decode_capacity_utilization']}; "
            f"fingerprint {s['trace_fingerprint']} -> {output_path}"
        )
    if not quiet and "cost" in report:
        click.echo(_cost_line(report["cost"]))


def _cost_line(cost: dict[str, Any]) -> str:
    line = f"cost: {cost['gpu_hours']:.6f} GPU-hours"
    if cost["priced"]:
        per = cost["usd_per_million_output_tokens"]
        line += (
            f", ${cost['usd']:.6f}"
            + (f" (${per:.6f} per million output tokens)" if per is not None else "")
            + f"; {cost['usage']} usage; prices of {cost['prices']['date']} from {cost['prices']['origin']}"
        )
    return line


def _prices(policy: Any, prices_path: Path | None) -> tuple[Any, Any]:
    """The price table (``--prices``, else the policy's ``prices:``) and the sink that finds the
    replay's end and tokens; (None, None) without a table. Every pool's GPU must be priced and
    the replay timed: checked now, before anything runs."""
    from ..cost.prices import select_prices
    from ..cost.report import check_priced
    from ..cost.usage import UsageSink
    from ..timing.gpus import gpu_key
    from ..util.errors import TickgateError

    prices = select_prices(prices_path, policy.data, policy.locations, policy.path, gpu_key)
    if prices is None:
        return None, None
    if policy.timing is None:
        raise TickgateError(
            f"{policy.path}: the policy has no timing section, and cost is GPUs x time: add one "
            f"(docs/timing.md) or leave out {'--prices' if prices_path else 'its prices section'}"
        )
    check_priced(policy.data, prices)
    return prices, UsageSink()
