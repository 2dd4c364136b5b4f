"""``tickgate generate``: a synthetic workload, as ``vllm bench serve``'s random dataset draws it.

Lengths and arrival times come from :mod:`tickgate.workload.generate` (what matches vLLM and what
does not: docs/workload.md, "Generating a workload"). The file is the streamable workload layout
``tickgate replay`` reads, written atomically; the same arguments give the same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from ..util.words import plural


class _Lengths(click.ParamType):
    """``A`` or ``A:B``."""

    name = "A[:B]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..workload.generate import LengthRange

        if not isinstance(value, str):
            return value
        try:
            return LengthRange.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class _Positive(click.ParamType):
    """A number > 0; ``inf`` allowed (it means something to vLLM for both options)."""

    name = "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if math.isnan(number) or number <= 0:
            self.fail(f"{value!r}: give a number above 0 (or inf)", param, ctx)
        return number


@click.command("generate")
@click.option(
    "--requests",
    "n",
    required=True,
    type=click.IntRange(1, 10_000_000),
    help="Number of requests (vllm bench --num-prompts).",
)
@click.option(
    "--input-len",
    "input_len",
    required=True,
    type=_Lengths(),
    help="Prompt tokens: A, or A:B for uniform integers in [A, B].",
)
@click.option(
    "--output-len",
    "output_len",
    required=True,
    type=_Lengths(),
    help="Output tokens (max_output_tokens): C, or C:D for uniform integers in [C, D].",
)
@click.option(
    "--rate",
    type=_Positive(),
    default=None,
    help="Requests per second, Poisson or gamma arrivals (vllm bench --request-rate); inf: all at 0.",
)
@click.option(
    "--burstiness",
    type=_Positive(),
    default=None,
    help="Gamma shape of the intervals: 1 (default) is Poisson, < 1 burstier, > 1 more even; needs --rate.",
)
@click.option(
    "--concurrency",
    "max_concurrency",
    type=click.IntRange(1, 1_000_000_000),
    default=None,
    help="At most this many requests in flight (closed loop; writes max_concurrency).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    default=0,
    show_default=True,
    help="Seed of the lengths and of the arrivals (vllm bench --seed).",
)
@click.option(
    "--prefix-len",
    type=click.IntRange(0, 10_000_000),
    default=0,
    show_default=True,
    help="Tokens of a prefix shared by every prompt, added to its length (vllm bench --random-prefix-len).",
)
@click.option(
    "--block-size",
    type=click.IntRange(1, 65536),
    default=16,
    show_default=True,
    help="Tokens per prefix block of the shared prefix (with --prefix-len).",
)
@click.option("--description", default=None, help="Description to put in the workload header.")
@click.option(
    "--output",
    "output_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Workload JSON to write (streamable layout, written atomically).",
)
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def generate_command(
    n: int,
    input_len: Any,
    output_len: Any,
    rate: float | None,
    burstiness: float | None,
    max_concurrency: int | None,
    seed: int,
    prefix_len: int,
    block_size: int,
    description: str | None,
    output_path: Path,
    quiet: bool,
) -> None:
    """Generate a synthetic workload: random lengths and Poisson/gamma arrivals as vllm bench draws them."""
    from ..util.atomic import atomic_writer, check_writable
    from ..workload.format import MAX_TOKENS, write_workload
    from ..workload.generate import MAX_ARRIVAL_MS, generate

    if burstiness is not None and rate is None:
        raise click.UsageError("--burstiness shapes the arrivals of --rate: give --rate too")
    if rate is None and max_concurrency is None:
        raise click.UsageError("give --rate, --concurrency or both")
    if prefix_len + input_len.high + output_len.high > MAX_TOKENS:
        raise click.UsageError(
            f"--prefix-len + --input-len + --output-len can reach "
            f"{prefix_len + input_len.high + output_len.high:,} tokens; a request "
            f"has at most {MAX_TOKENS:,} (prompt and output together)"
        )
    if rate is not None and not math.isinf(rate) and n / rate * 1000.0 > MAX_ARRIVAL_MS:
        raise click.UsageError(
            f"--requests {n} at --rate {rate:g} end after {MAX_ARRIVAL_MS:g} ms, "
            "the latest arrival a workload holds"
        )
    check_writable(output_path)
    header, requests = generate(
        n,
        input_len,
        output_len,
        seed=seed,
        rate=rate,
        burstiness=1.0 if burstiness is None else burstiness,
        max_concurrency=max_concurrency,
        prefix_len=prefix_len,
        block_size=block_size,
        description=description,
    )
    with atomic_writer(output_path) as fh:
        count = write_workload(fh, header, requests)
    if not quiet:
        click.echo(
            f"{header.description} -> {output_path}"
            if description is None
            else f"generated {plural(count, 'request')} -> {output_path}"
        )
