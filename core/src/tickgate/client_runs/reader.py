"""Benchmark-client runs as workloads: what a client sent, replayed (``tickgate import vllm-bench RUN``).

The gate already reads every client's per-request output as neutral observations (the backend
mirrors: ``tokens_in``, ``tokens_out``, ``start_ms``, ``error`` per request, the run's
``request_rate`` / ``max_concurrency`` in its aggregates). A client reader turns those into requests
instead of parsing the file a second time, so a file the gate accepts imports, and a file it rejects
fails the same way (one located line).

What the base does for every client (docs/importers.md, "Benchmark-client runs"):

* **send times**: a request's ``start_ms`` (the client's own send stamp, relative to its first
  send) is its ``arrival_ms``; the requests are written in send order (a stable sort: equal stamps
  keep the file's order). A file without send stamps gets a Poisson process at its recorded
  ``request_rate`` (:func:`tickgate.workload.generate.send_times_s`, vLLM's ``get_request``: gamma
  intervals of the recorded burstiness, the last send at N / rate) from the client's default seed,
  and ``source.send_times`` says so: the rate is the client's, the draws are not.
* **closed loop**: the recorded ``max_concurrency`` becomes the header's (docs/workload.md).
* **lengths**: ``prompt_tokens`` is the client's count of the prompt it sent, ``max_output_tokens``
  the tokens the server generated: the shipped runs ran with max_tokens (and ignore_eos), so the
  count is the limit the request ran under.
* **failed requests** (an error recorded) are skipped, counted per reason in ``source.skipped`` with
  their request positions, and reported by ``tickgate import``: the server never generated their
  output, so there is no length to replay. A request whose output is 0 tokens is skipped the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..importers._common import SkipTally, TraceReader
from ..interfaces.model import Request
from ..util.errors import InputError
from ..workload.format import MAX_TOKENS

FAILED = "failed request (the client recorded an error)"
ZERO_OUTPUT = "zero output tokens"


class ClientRunReader(TraceReader):
    """Base of the readers of a benchmark client's per-request output.

    A subclass implements :meth:`observations` (the observation document its backend mirror
    reads from the file) and names the client's default ``seed`` (used only when the file has no
    send times). It may override :meth:`lengths` when the file does not count tokens itself.
    ``max_concurrency`` is set by ``read`` (None: open loop); ``tickgate import`` puts it in the
    workload header.
    """

    file_kind = "JSON"
    #: the client's default ``--seed``: Poisson send times are regenerated from it
    seed: ClassVar[int] = 0
    max_concurrency: int | None = None

    def observations(self, path: Path) -> dict[str, Any]:
        raise NotImplementedError

    def lengths(self, path: Path, index: int, observed: Mapping[str, Any]) -> tuple[int, int]:
        """``(prompt tokens, output tokens)`` of ``observed``, the ``index``-th observation."""
        prompt, output = observed.get("tokens_in"), observed.get("tokens_out")
        if prompt is None or output is None:
            missing = "input" if prompt is None else "output"
            raise InputError(
                path, f"request {observed['request_id']}: the file records no {missing} token count"
            )
        return prompt, output

    def start(self, path: Path, options: Mapping[str, Any]) -> None:
        super().start(path, options)
        self.skipped = SkipTally("first_requests")  # positions in the client's list, not lines
        self.source["time_origin"] = "arrival_ms is relative to the client's first send"
        self.max_concurrency = None

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        self.start(path, options)
        doc = self.observations(path)
        observed = doc.get("requests")
        if not observed:
            raise InputError(
                path, f"no per-request records: a {self.name} workload needs {self.per_request_hint()}"
            )
        extra = doc["run"].get("aggregates", {}).get("extra", {})
        self.max_concurrency = self.concurrency(path, extra)
        if self.max_concurrency is not None:
            self.source["max_concurrency"] = self.max_concurrency
        timed = all(o.get("start_ms") is not None for o in observed)
        if timed:
            arrivals = [float(o["start_ms"]) for o in observed]
            self.source["send_times"] = "the client's per-request send times"
        else:
            arrivals = self.regenerated_times(path, len(observed), extra)
        order = sorted(range(len(observed)), key=arrivals.__getitem__)
        requests = 0
        for rows, i in enumerate(order, start=1):
            obs = observed[i]
            rid = obs["request_id"]  # the gate's id for it: a later check joins the two
            if obs.get("error"):
                self.skipped.add(FAILED, rid)
                self.progress(rows, requests)
                continue
            prompt, output = self.lengths(path, i, obs)
            if output == 0 or prompt == 0:
                self.skipped.add(ZERO_OUTPUT if output == 0 else "zero prompt tokens", rid)
                self.progress(rows, requests)
                continue
            if prompt > MAX_TOKENS or output > MAX_TOKENS:
                raise InputError(path, f"request {rid}: expected at most {MAX_TOKENS} tokens")
            requests += 1
            self.progress(rows, requests)
            yield Request(
                id=f"{self.id_prefix}-{rid}",
                prompt_tokens=prompt,
                max_output_tokens=output,
                arrival_ms=round(arrivals[i], 6),
            )
        self.progress(len(order), requests)

    def per_request_hint(self) -> str:
        return "the client's per-request output"

    def concurrency(self, path: Path, extra: Mapping[str, Any]) -> int | None:
        """The client's ``max_concurrency`` (closed loop), None for an open loop."""
        value = extra.get("max_concurrency")
        if value is None:
            return None
        if not float(value).is_integer() or value < 1:
            raise InputError(path, f"max_concurrency: expected a whole number >= 1, found {value!r}")
        return int(value)

    def regenerated_times(self, path: Path, n: int, extra: Mapping[str, Any]) -> list[float]:
        """Send times (ms) of a file that records none: a Poisson process at its recorded rate."""
        from ..workload.generate import send_times_s

        rate = extra.get("request_rate")
        if rate is None:
            raise InputError(
                path, "the file records neither per-request send times nor a request_rate to draw them from"
            )
        rate = math.inf if rate == "inf" else rate
        if not isinstance(rate, (int, float)) or rate <= 0:
            raise InputError(
                path, f"request_rate: expected a rate > 0 to draw send times from, found {rate!r}"
            )
        burstiness = extra.get("burstiness", 1.0)
        self.source["time_origin"] = "arrival_ms counts from the start of the run, as the client's draws do"
        self.source["send_times"] = (
            "all at 0 ms (request rate inf)"
            if math.isinf(rate)
            else f"regenerated: Poisson at the recorded {rate:g} req/s, burstiness {burstiness:g}, "
            f"seed {self.seed} (the client's default); not the client's own draws"
        )
        return [s * 1000.0 for s in send_times_s(n, rate, burstiness, self.seed)]
