"""The ``sglang-bench`` workload reader: a ``python -m sglang.bench_serving --output-details`` run,
replayed (``tickgate import sglang-bench RUN.jsonl --output W.json``; the last line's run unless
it is the only one).

The file is read by this adapter's backend mirror (:class:`tickgate_sglang.bench.SglangBenchMirror`,
the gate's reader of it, bare ``Infinity`` included); :class:`tickgate.ClientRunReader` turns its
per-request observations into requests. Exact: ``input_lens`` (prompt), ``output_lens`` (the
tokens generated, the output limit of the replayed request), ``max_concurrency``. Inferred: the
send times. sglang records none, so they are a Poisson process at the recorded ``request_rate``
drawn with seed 1 (sglang's ``--seed`` default) the way ``vllm bench serve`` draws them
(:func:`tickgate.workload.generate.send_times_s`): the same rate, not sglang's own draws (its
dataset sampling draws from the same generator first). ``request_rate`` Infinity: all at 0 ms,
which is what sglang does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import ClientRunReader

from .bench import SglangBenchMirror


class SglangBenchWorkloadReader(ClientRunReader):
    name: ClassVar[str] = "sglang-bench"
    description: ClassVar[str] = (
        "sglang.bench_serving --output-details JSONL: what the client sent (prompt/output tokens; "
        "Poisson send times at the recorded rate)."
    )
    id_prefix = "sb"
    file_kind = "JSONL"
    seed: ClassVar[int] = 1  # sglang.bench_serving --seed default

    def observations(self, path: Path) -> dict[str, Any]:
        return SglangBenchMirror().read(path)

    def per_request_hint(self) -> str:
        return "a run written with --output-details (per-request arrays input_lens, output_lens, ...)"
