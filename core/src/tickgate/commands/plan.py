"""``tickgate plan``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..sweep.executor import EXECUTORS
from ..util.errors import TickgateError
from ..util.words import plural


@click.command("plan")
@click.option(
    "--workload",
    "workload_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Workload JSON (or a trace, with --input-format).",
)
@click.option(
    "--input-format",
    default="workload",
    show_default=True,
    help="'workload' or the name of a workload reader (see `tickgate plugins`).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Replay only the first N requests.")
@click.option(
    "--block-size",
    type=click.IntRange(1, 65536),
    default=None,
    help="Prefix-block size for trace formats (a workload file carries its own).",
)
@click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The base policy (with a timing section: SLOs are in ms); --vary changes it.",
)
@click.option(
    "--slo",
    "slo_texts",
    multiple=True,
    required=True,
    metavar="NAME=MS",
    help="A latency limit, e.g. ttft_p99_ms=2000, itl_p99_ms=50 (metric ttft/tpot/itl/e2e, "
    "stat p50/p90/p95/p99/mean/max). Repeatable.",
)
@click.option(
    "--goodput",
    type=float,
    default=None,
    metavar="G",
    help="Also require this fraction of requests to meet every per-request SLO (TTFT, TPOT, e2e).",
)
@click.option(
    "--vary",
    "vary_texts",
    multiple=True,
    required=True,
    metavar="PATH=LO..HI|A,B,C",
    help="A dotted policy path and its values: an integer range (monotone: searched by bisection) "
    "or a list (each replayed). Repeatable; at most one range.",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    type=click.Path(path_type=Path),
    help="PLAN.json: the recommendation and the evidence (written atomically, also when "
    "nothing meets the SLOs).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default 1); with --executor ray, the CPUs of a local Ray instance.",
)
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="Where replays run, as for tickgate sweep.",
)
@click.option(
    "--cost",
    type=click.Choice(["gpus", "usd"]),
    default="gpus",
    show_default=True,
    help="What the recommendation minimises: GPUs (every configuration of one GPU kind), or USD per "
    "hour (GPUs x the price of their kind; needs prices).",
)
@click.option(
    "--prices",
    "prices_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A price table, USD per GPU-hour by GPU kind (e.g. policies/prices/cloud-2026.yaml); wins over "
    "the policy's prices: section. With it the evidence gets USD per hour and per million output tokens.",
)
@click.option("--quiet", is_flag=True, help="Do not print the table and the recommendation.")
def plan_command(
    workload_path: Path,
    input_format: str,
    limit: int | None,
    block_size: int | None,
    policy_path: Path,
    slo_texts: tuple[str, ...],
    goodput: float | None,
    vary_texts: tuple[str, ...],
    output_path: Path,
    jobs: int | None,
    executor: str,
    cost: str,
    prices_path: Path | None,
    quiet: bool,
) -> None:
    """Find the cheapest configuration (GPUs: replicas x tensor parallel x data
    parallel; or with --cost usd, dollars per hour) whose replay of the workload
    meets every SLO; print it and the evidence, write PLAN.json. Exit status 1 when no configuration meets them
    (PLAN.json still written, its recommendation null), 2 for bad options."""
    import tempfile

    from ..cost.prices import select_prices
    from ..plan.output import document, summary, table, write_plan
    from ..plan.pricing import check_costs
    from ..plan.search import Question, search
    from ..plan.spec import check_goodput, check_varies, parse_slos, parse_vary
    from ..sweep.executor import make_executor
    from ..sweep.spec import check_requests, file_sha256
    from ..timing.gpus import gpu_key
    from ..util.atomic import check_distinct_outputs
    from ..util.progress import progress

    slos = parse_slos(slo_texts)
    limits = check_goodput(goodput, slos)
    varies = tuple(parse_vary(text) for text in vary_texts)
    check_distinct_outputs(
        {"--output": output_path},
        {"--workload": workload_path, "--policy": policy_path, "--prices": prices_path},
    )
    base, locations = _base_policy(policy_path)
    _check_fixed_size(base, locations, policy_path)
    check_varies(varies, base, str(policy_path))
    prices = select_prices(prices_path, base, locations, policy_path, gpu_key)
    workload = _workload(workload_path, input_format, block_size, limit)
    _check_values(varies, base, policy_path)
    check_costs(base, varies, cost, prices, gpu_key, str(policy_path))
    check_requests(workload)  # a request every run would refuse: refused now, PLAN.json untouched
    question = Question(
        base, workload, file_sha256(workload.path), slos, varies, goodput, limits, cost=cost, prices=prices
    )
    runner = make_executor(executor, jobs)  # a missing Ray too, before anything runs
    with (
        progress("plan", unit=" runs", quiet=quiet) as bar,
        runner,
        tempfile.TemporaryDirectory(prefix="tickgate-plan-") as root,
    ):
        recommendation, evidence = search(
            question, runner, Path(root), on_run=lambda entry: bar.step(f"run {entry['run']}")
        )
    write_plan(output_path, document(question, str(policy_path), recommendation, evidence))
    if not quiet:
        click.echo(table(question, evidence))
        if recommendation is not None:  # else the error line says it
            click.echo(summary(recommendation, evidence, output_path))
    failed = [e for e in evidence if "error" in e]
    if failed:
        click.echo(
            f"warning: {len(failed)} of {plural(len(evidence), 'run')} failed and count as missing the SLOs "
            f"(first: run {failed[0]['run']}: {failed[0]['error']})",
            err=True,
        )
    if recommendation is None:
        raise NothingMeets(
            f"no configuration meets the SLOs ({plural(len(evidence), 'run')}); the evidence is in {output_path}"
        )


class NothingMeets(TickgateError):
    """No configuration met the SLOs: exit status 1 (PLAN.json is written)."""

    exit_code = 1


def _base_policy(path: Path) -> tuple[dict[str, Any], Any]:
    from ..host.policy import load_policy
    from ..util.locations import load_yaml

    policy = load_policy(path)  # its own errors, located in it
    if policy.timing is None:
        raise TickgateError(
            f"{path}: the policy has no timing section, and SLOs are in ms: add one (docs/timing.md)"
        )
    return load_yaml(path)


def _workload(path: Path, input_format: str, block_size: int | None, limit: int | None) -> Any:
    from ..host.registry import get_registry
    from ..sweep.spec import Workload
    from ..util.errors import InputError

    if not path.is_file():
        raise InputError(path, "workload file not found")
    readers = get_registry().names("workload_reader")
    if input_format != "workload" and input_format not in readers:
        raise TickgateError(
            f"--input-format {input_format}: unknown format; expected one of: "
            f"{', '.join(['workload', *readers])}"
        )
    if input_format == "workload" and block_size is not None:
        raise InputError(
            path,
            "--block-size applies to trace formats (--input-format); a workload file "
            "gives its prefix block size in its header (block_size)",
        )
    return Workload(path, str(path), input_format, block_size, limit)


def _check_values(varies: Any, base: dict[str, Any], policy_path: Path) -> None:
    """Each list value and both ends of a range, set alone in the base policy, must
    load as a policy: a value the schema or a plugin refuses is an option error now,
    not a failed replay later."""
    import copy
    import json
    import tempfile

    from ..host.policy import load_policy
    from ..plan.spec import PlanError
    from ..sweep.spec import set_path
    from ..util.errors import InputError

    with tempfile.TemporaryDirectory(prefix="tickgate-plan-check-") as folder:
        probe = Path(folder) / "policy.json"
        for vary in varies:
            for value in vary.values:
                doc = copy.deepcopy(base)
                set_path(doc, vary.path, value)
                probe.write_text(json.dumps(doc, indent=2), encoding="utf-8")
                try:
                    load_policy(probe)
                except InputError as exc:
                    where = f"{exc.json_path}: " if exc.json_path else ""
                    raise PlanError(
                        f"{vary.option}: {json.dumps(value)} is refused: {where}{exc.message}"
                    ) from None
                except TickgateError as exc:
                    raise PlanError(
                        f"{vary.option}: {json.dumps(value)} is refused: "
                        f"{str(exc).replace(str(probe), str(policy_path))}"
                    ) from None


def _check_fixed_size(base: Any, locations: Any, policy_path: Path) -> None:
    """A plan prices a fleet of fixed size (its GPUs, or their dollars per hour); a policy whose
    fleet scales has none, so its cost would be the starting size's: refused, with where to look."""
    from ..util.errors import InputError
    from ..util.locations import json_path

    cluster = base.get("cluster") if isinstance(base, dict) else None
    if isinstance(cluster, dict) and "autoscaler" in cluster:
        at = json_path(("cluster", "autoscaler"))
        line, column = locations.get(at, (None, None))
        raise InputError(
            policy_path,
            "plan prices a fleet of fixed size, and this one scales (cluster.autoscaler): compare "
            "autoscaled runs by their reports' cost sections (replay --prices; docs/autoscaling.md)",
            line=line,
            column=column,
            json_path=at,
        )
