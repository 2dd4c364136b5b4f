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
    default=None,
    type=click.IntRange(1, 10_000_000),
    help="Number of requests (vllm bench --num-prompts); with --rate-profile optional, a cap.",
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
    "--rate-profile",
    "profile_spec",
    metavar="FILE|PRESET",
    default=None,
    help="Arrivals follow a piecewise-linear rate: a JSON/YAML file of [time_s, rate] points, "
    "or a preset, 'day' or 'workday' (with --peak-rate, --period); instead of --rate.",
)
@click.option(
    "--peak-rate",
    type=_Positive(),
    default=None,
    help="Requests per second at the peak of a --rate-profile preset.",
)
@click.option(
    "--period",
    "period_s",
    type=_Positive(),
    default=None,
    help="Seconds a --rate-profile preset's 24 hours are compressed into [default: 86400].",
)
@click.option(
    "--burstiness",
    type=_Positive(),
    default=None,
    help="Gamma shape of the intervals: 1 (default) is Poisson, < 1 burstier, > 1 more even; "
    "needs --rate or --rate-profile.",
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
    n: int | None,
    input_len: Any,
    output_len: Any,
    rate: float | None,
    profile_spec: str | None,
    peak_rate: float | None,
    period_s: float | None,
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

    if rate is not None and profile_spec is not None:
        raise click.UsageError(
            "--rate and --rate-profile exclude each other: give one (a constant or a varying rate)"
        )
    profile = _profile(profile_spec, peak_rate, period_s, n)
    if burstiness is not None and rate is None and profile is None:
        raise click.UsageError(
            "--burstiness shapes the arrivals of --rate or --rate-profile: give one of them too"
        )
    if rate is None and profile is None and max_concurrency is None:
        raise click.UsageError("give --rate (or --rate-profile), --concurrency or both")
    if n is None and profile is None:
        raise click.UsageError(
            "give --requests (only --rate-profile can do without: it ends at its last time)"
        )
    if prefix_len + input_len.high + output_len.high > MAX_TOKENS:
        raise click.UsageError(
            f"--prefix-len + --input-len + --output-len can reach "
            f"{prefix_len + input_len.high + output_len.high:,} tokens; a request "
            f"has at most {MAX_TOKENS:,} (prompt and output together)"
        )
    if n is not None and rate is not None and not math.isinf(rate) and n / rate * 1000.0 > MAX_ARRIVAL_MS:
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
        rate_profile=profile,
    )
    with atomic_writer(output_path) as fh:
        count = write_workload(fh, header, requests)
    if not quiet:
        click.echo(
            f"{header.description} -> {output_path}"
            if description is None
            else f"generated {plural(count, 'request')} -> {output_path}"
        )


def _profile(spec: str | None, peak_rate: float | None, period_s: float | None, n: int | None) -> Any:
    """The rate profile ``--rate-profile`` names (None without one): a preset scaled by
    ``--peak-rate`` and ``--period``, or a file (its errors one located line, exit 2). A preset's
    name wins over a file of that name in the working directory (write ``./day`` for the file)."""
    from ..workload.generate import MAX_ARRIVAL_MS
    from ..workload.rate_profile import DAY_S, MAX_EXPECTED, PRESETS, load, preset

    if spec is None:
        if peak_rate is not None or period_s is not None:
            raise click.UsageError(
                "--peak-rate and --period scale a --rate-profile preset: give --rate-profile too"
            )
        return None
    if spec in PRESETS:
        if peak_rate is None:
            raise click.UsageError(
                f"the {spec!r} rate profile peaks at 1: give --peak-rate R (requests per second at the peak)"
            )
        profile = preset(spec, peak_rate=peak_rate, period_s=DAY_S if period_s is None else period_s)
    else:
        if peak_rate is not None or period_s is not None:
            raise click.UsageError(
                f"--peak-rate and --period scale a preset ({', '.join(sorted(PRESETS))}); "
                f"the file {spec} gives its own times and rates"
            )
        profile = load(Path(spec))
    # a preset's --period can reach it (a file's times are bounded by the schema)
    if profile.end_s * 1000.0 > MAX_ARRIVAL_MS:
        raise click.UsageError(
            f"the rate profile ends after {MAX_ARRIVAL_MS:g} ms, the latest arrival a workload holds"
        )
    expected = profile.expected_requests()
    if n is None and expected > MAX_EXPECTED:
        raise click.UsageError(
            f"the rate profile calls for about {expected:,.0f} requests; at most {MAX_EXPECTED:,} "
            "(give --requests N to stop after N)"
        )
    return profile
