"""``tickgate import FORMAT INPUT --output W.json``: convert a trace or a benchmark client's run into a workload.

The output is the streamable workload layout (header line, one request per
line) that ``tickgate replay`` reads without holding it in memory. The header
records where the requests came from (``source``: format, file, block size,
rows read, requests written, rows skipped and why). Those counts are only
known once the trace has been read, so the request lines go to a spool file
first and the output is assembled from header + spool, atomically: a failed
import never leaves a half-written workload.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..util.words import plural

if TYPE_CHECKING:
    from ..interfaces.model import Request


def _skipped_message(source: dict[str, Any]) -> str | None:
    skipped = source.get("skipped")
    if not skipped:
        return None
    parts = []
    for reason, entry in skipped.items():
        key, what = ("first_lines", "lines") if "first_lines" in entry else ("first_requests", "requests")
        lines = ", ".join(str(n) for n in entry[key])
        more = ", ..." if entry["count"] > len(entry[key]) else ""
        parts.append(f"{entry['count']} row(s) with {reason} ({what} {lines}{more})")
    return "skipped " + "; ".join(parts)


def _skipped_count(source: dict[str, Any]) -> int:
    return sum(entry["count"] for entry in source["skipped"].values())


@click.command("import")
@click.argument("fmt", metavar="FORMAT")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "output_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Workload JSON to write (streamable layout, written atomically).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Import only the first N requests.")
@click.option(
    "--block-size",
    type=click.IntRange(1, 65536),
    default=None,
    help="Tokens per prefix-block id (mooncake; default 512, the Mooncake release).",
)
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0, min_open=True, max=1e9),
    default=None,
    help="Multiply every arrival time by F (0.25: four times faster, 2: half the load); F > 0.",
)
@click.option("--description", default=None, help="Description to put in the workload header.")
@click.option("--quiet", is_flag=True, help="Print nothing but errors and skipped-row reports (no progress).")
def import_command(
    fmt: str,
    input_path: Path,
    output_path: Path,
    limit: int | None,
    block_size: int | None,
    time_scale: float | None,
    description: str | None,
    quiet: bool,
) -> None:
    """Import a trace (mooncake, azure, burstgpt, splitwise), a benchmark client's run (vllm-bench,
    sglang-bench, aiperf, genai-perf) or a plugin's format as a workload."""
    import contextlib
    import itertools

    from ..host.registry import get_registry
    from ..importers import import_parts
    from ..importers._common import time_scaled
    from ..interfaces import optional_attribute
    from ..util.atomic import atomic_writer, check_distinct_outputs, spool_file
    from ..util.errors import InputError, PluginError
    from ..util.progress import progress
    from ..workload.format import WORKLOAD_TAIL, WorkloadHeader, workload_head, write_requests

    try:
        info = get_registry().get("workload_reader", fmt)
    except PluginError as exc:
        raise InputError(input_path, str(exc)) from None
    if not input_path.exists():
        raise InputError(input_path, "file not found")
    reader = info.obj()
    options: dict[str, Any] = {}
    if block_size is not None:
        options["block_size"] = block_size
    stream = reader.read(input_path, options)  # a generator: reads nothing unless iterated
    if limit is not None:
        stream = itertools.islice(stream, limit)

    def mapped(requests: Iterable[Request]) -> Iterable[Request]:
        return requests if time_scale is None else time_scaled(requests, time_scale, input_path)

    check_distinct_outputs({"--output": output_path}, {"TRACE": input_path})
    parts = import_parts.split(input_path) if import_parts.wanted(reader, input_path, limit) else None
    # the spools are the output's parts: a full disk there names the output
    second_spool = spool_file(output_path) if parts else contextlib.nullcontext()
    with (
        spool_file(output_path) as spool,
        second_spool as second,
        progress("import", unit=" requests", quiet=quiet) as bar,
    ):  # on a terminal only
        if parts:  # two processes, half the file each (parallel/import_parts.py); the bar counts this one's
            assert second is not None  # the second spool, with parts
            first_count, second_count = import_parts.read_in_parts(
                reader, input_path, options, parts, spool, second, counted=bar.counted, mapped=mapped
            )
            count = first_count + second_count
        else:
            count = write_requests(spool, bar.counted(mapped(stream)))
        source = dict(optional_attribute(reader, "source") or {"format": fmt, "file": str(input_path)})
        source["requests"] = count
        if limit is not None:
            source["limit"] = limit
        if time_scale is not None:
            source["time_scale"] = time_scale
        block = source.get("block_size")
        scaled = "" if time_scale is None else f", arrival times x {time_scale:g}"
        concurrency = optional_attribute(reader, "max_concurrency")  # a client run's closed loop
        header = WorkloadHeader(
            block_size=block if isinstance(block, int) else None,
            max_concurrency=concurrency if isinstance(concurrency, int) else None,
            description=description or f"{fmt} trace {input_path.name} imported by tickgate{scaled}",
            source=source,
        )
        with atomic_writer(output_path) as fh:
            fh.write(workload_head(header))
            spool.seek(0)
            shutil.copyfileobj(spool, fh, 1 << 20)
            if parts:
                if first_count and second_count:
                    fh.write(",\n")  # what write_requests puts between two requests
                assert second is not None
                second.seek(0)
                shutil.copyfileobj(second, fh, 1 << 20)
            fh.write(WORKLOAD_TAIL)
    skipped = _skipped_message(source)
    if skipped:
        click.echo(f"warning: {input_path}: {skipped}", err=True)
    if not quiet:
        click.echo(
            f"imported {plural(count, 'request')} from {input_path} ({fmt}"
            + (f", block size {block}" if block else "")
            + (f", max concurrency {concurrency}" if isinstance(concurrency, int) else "")
            + (f", {_skipped_count(source)} skipped" if source.get("skipped") else "")
            + f") -> {output_path}"
        )
