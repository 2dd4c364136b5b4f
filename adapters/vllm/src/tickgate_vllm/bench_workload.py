"""The ``vllm-bench`` workload reader: a ``vllm bench serve --save-result --save-detailed`` run,
replayed (``tickgate import vllm-bench RESULT.json --output W.json``).

The file is read by this adapter's backend mirror (:class:`tickgate_vllm.bench.VllmBenchMirror`,
the gate's reader of it); :class:`tickgate.ClientRunReader` turns its per-request observations
into requests. Exact: ``input_lens`` (prompt), ``output_lens`` (the tokens generated, the
output limit of the replayed request), ``start_times`` (the client's send stamps, relative to its
first send), ``max_concurrency``. A result without ``start_times`` (versions before them) gets
Poisson send times regenerated from its ``request_rate`` and ``burstiness`` with seed 0, vLLM's
``--seed`` default: the file records no seed, so these are not the client's draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import ClientRunReader

from .bench import VllmBenchMirror


class VllmBenchWorkloadReader(ClientRunReader):
    name: ClassVar[str] = "vllm-bench"
    description: ClassVar[str] = (
        "vllm bench serve --save-detailed result: what the client sent (send times, prompt/output tokens)."
    )
    id_prefix = "vb"
    seed: ClassVar[int] = 0  # vllm bench serve --seed default

    def observations(self, path: Path) -> dict[str, Any]:
        return VllmBenchMirror().read(path)

    def per_request_hint(self) -> str:
        return "the per-request arrays of --save-detailed (input_lens, output_lens, ttfts, ...)"
