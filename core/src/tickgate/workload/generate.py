"""Synthetic workloads drawn the way ``vllm bench serve`` draws its random dataset and its
request times (``tickgate generate``; docs/workload.md, "Generating a workload").

* **Lengths**: integers uniform in ``[low, high]``, inputs first, then outputs, each as one
  ``randint(low, high + 1, size=N)`` call on numpy's legacy ``RandomState(seed)``: the draws of
  vLLM's ``RandomDataset.sample`` from the globally seeded ``np.random`` (``np.random.seed(seed)``
  in ``benchmark_serving.py``, ``benchmarks/benchmark_dataset.py``). vLLM's current
  ``vllm/benchmarks/datasets.py`` draws the same ranges from ``np.random.default_rng(seed)``
  instead, a different generator: the lengths are not the ones it draws.
* **Arrivals**: ``get_request`` of ``vllm/benchmarks/serve.py`` (0.33): one
  ``gamma(shape=burstiness, scale=1 / (rate * burstiness))`` interval per request (the constant
  ``1 / rate`` for an infinite burstiness) from ``np.random`` seeded with the seed, summed, then
  scaled so the last request comes at ``N / rate`` seconds, the first after its own interval.
  Nothing else draws from that generator in vLLM before it, so for the same seed, rate and
  burstiness these are vLLM's send times (here in ms, rounded to the microsecond).

numpy's legacy ``RandomState`` streams are fixed across numpy versions (``Generator``'s are not
promised to be): the same arguments give the same workload bytes on any install. numpy is
imported only here, when a workload is generated.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from ..interfaces.model import Request
from .format import MAX_TOKENS, WorkloadHeader

if TYPE_CHECKING:
    from .rate_profile import RateProfile

#: the largest arrival a workload file accepts (schemas/workload.schema.json)
MAX_ARRIVAL_MS = 1e15


@attrs.frozen
class LengthRange:
    """``A`` (every request the same) or ``A:B`` (uniform integers in [A, B])."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> LengthRange:
        """``"128"`` or ``"64:512"``; raises ValueError saying what is wrong."""
        parts = text.strip().split(":")
        if len(parts) > 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise ValueError(f"{text!r} is not a length A or a range A:B of whole numbers")
        low, high = int(parts[0]), int(parts[-1])  # int() takes the surrounding spaces
        if low < 1:
            raise ValueError(f"{text!r}: lengths start at 1")
        if high < low:
            raise ValueError(f"{text!r}: the range ends before it starts")
        if high > MAX_TOKENS:
            raise ValueError(f"{text!r}: lengths go up to {MAX_TOKENS:,}")
        return cls(low, high)

    def to_json(self) -> list[int]:
        return [self.low, self.high]

    def __str__(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}:{self.high}"


def sample_lengths(
    n: int, inputs: LengthRange, outputs: LengthRange, seed: int
) -> tuple[list[int], list[int]]:
    """Input and output lengths of ``n`` requests, in vLLM's legacy ``RandomDataset`` order."""
    input_lens, output_lens = _draw_lengths(n, inputs, outputs, seed)
    return input_lens.tolist(), output_lens.tolist()


def send_times_s(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """When each of ``n`` requests is sent, in seconds from the start, as vLLM's
    ``get_request`` computes it (no ramp-up). ``rate`` may be infinite: all at 0."""
    if math.isinf(rate):
        return [0.0] * n
    return _send_times(n, rate, burstiness, seed).tolist()


def _draw_lengths(n: int, inputs: LengthRange, outputs: LengthRange, seed: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.RandomState(seed)
    input_lens = rng.randint(inputs.low, inputs.high + 1, size=n)
    output_lens = rng.randint(outputs.low, outputs.high + 1, size=n)
    return input_lens, output_lens


def _send_times(n: int, rate: float, burstiness: float, seed: int) -> Any:
    """:func:`send_times_s` for a finite rate, as a float64 array (8 bytes a request)."""
    import numpy as np

    if math.isinf(burstiness):
        delays = np.full(n, 1.0 / rate)  # the interval tends to 1 / rate
    else:
        delays = np.random.RandomState(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    # cumsum adds left to right, one element at a time, as vLLM's running sum does (bit for bit:
    # tests/test_generate.py compares the two); the product is elementwise IEEE, as vLLM's
    times = np.cumsum(delays)
    if n and times[-1] != 0:
        times *= (n / rate) / float(times[-1])  # vLLM pins the last request at N / rate seconds
    return times


#: requests turned from numpy arrays into Python values at a time (memory stays at the arrays')
_CHUNK = 1 << 16


def generate(
    n: int | None,
    inputs: LengthRange,
    outputs: LengthRange,
    *,
    seed: int,
    rate: float | None = None,
    burstiness: float = 1.0,
    max_concurrency: int | None = None,
    prefix_len: int = 0,
    block_size: int = 16,
    description: str | None = None,
    rate_profile: RateProfile | None = None,
) -> tuple[WorkloadHeader, Iterator[Request]]:
    """The header and requests of a generated workload.

    With a finite ``rate`` requests carry ``arrival_ms``; otherwise (no rate, or an infinite one)
    they all arrive at step 0 (``arrival_tick``), which every policy replays. ``prefix_len``: a
    prefix of that many tokens shared by every prompt (vLLM's ``--random-prefix-len``), added to
    its sampled length and spelled as ``prefix_len // block_size`` shared prefix blocks. The
    draws are held as numpy arrays (24 bytes a request); requests are built as they are written.

    With a ``rate_profile`` (instead of ``rate``) the arrivals follow it (:mod:`.rate_profile`) up
    to its last time, at most ``n`` of them (``n`` None: no cap); the lengths are drawn for as many
    requests as arrived, from their own ``RandomState(seed)``, as with ``rate``.
    """
    cap = n
    times: Any = None
    if rate_profile is not None:
        from .rate_profile import arrival_times_s

        times = arrival_times_s(rate_profile, burstiness=burstiness, seed=seed, cap=cap)
        n = len(times)
    elif rate is not None and not math.isinf(rate):
        assert n is not None  # a constant rate needs a count (the command checks it)
        times = _send_times(n, rate, burstiness, seed)
    assert n is not None
    input_lens, output_lens = _draw_lengths(n, inputs, outputs, seed)
    shared = tuple(range(prefix_len // block_size)) or None
    width = len(str(max(n - 1, 0)))

    def requests() -> Iterator[Request]:
        for start in range(0, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            ins, outs = input_lens[start:stop].tolist(), output_lens[start:stop].tolist()
            arrivals = (
                [round(t * 1000.0, 3) for t in times[start:stop].tolist()]
                if times is not None
                else [None] * (stop - start)
            )
            for i, prompt, out, arrival in zip(range(start, stop), ins, outs, arrivals):
                yield Request(
                    id=f"req-{i:0{width}d}",
                    prompt_tokens=prefix_len + prompt,
                    max_output_tokens=out,
                    arrival_ms=arrival,
                    prefix_blocks=shared,
                )

    source: dict[str, Any] = {
        "generator": "tickgate generate",
        "requests": n,
        "input_len": inputs.to_json(),
        "output_len": outputs.to_json(),
        "seed": seed,
    }
    if rate is not None:
        source["rate"] = "inf" if math.isinf(rate) else rate
    if rate_profile is not None:
        if cap is not None:
            source["max_requests"] = cap
        source["rate_profile"] = rate_profile.to_json()
    if rate is not None or rate_profile is not None:
        source["burstiness"] = "inf" if math.isinf(burstiness) else burstiness
    if max_concurrency is not None:
        source["max_concurrency"] = max_concurrency
    if prefix_len:
        source["prefix_len"] = prefix_len
    header = WorkloadHeader(
        block_size=block_size if shared else None,
        description=description
        or _describe(n, inputs, outputs, rate, burstiness, max_concurrency, prefix_len, seed, rate_profile),
        source=source,
        max_concurrency=max_concurrency,
    )
    return header, requests()


def _describe(
    n: int,
    inputs: LengthRange,
    outputs: LengthRange,
    rate: float | None,
    burstiness: float,
    max_concurrency: int | None,
    prefix_len: int,
    seed: int,
    rate_profile: RateProfile | None = None,
) -> str:
    parts = [
        f"{n} requests",
        f"input {inputs} tokens" + (f" after a {prefix_len}-token shared prefix" if prefix_len else ""),
        f"output {outputs} tokens",
    ]
    kind = (
        "Poisson"
        if burstiness == 1.0
        else "evenly spaced"
        if math.isinf(burstiness)
        else f"gamma (burstiness {burstiness:g})"
    )
    if rate_profile is not None:
        from .rate_profile import describe

        parts.append(f"{kind} arrivals following {describe(rate_profile)}")
    elif rate is None or math.isinf(rate):
        parts.append("all sent at once")
    else:
        parts.append(f"{kind} arrivals at {rate:g} req/s")
    if max_concurrency is not None:
        parts.append(f"at most {max_concurrency} in flight")
    return "generated by tickgate generate: " + ", ".join(parts) + f", seed {seed}"
