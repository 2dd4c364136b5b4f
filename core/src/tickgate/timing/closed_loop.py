"""The requests of a closed-loop benchmark at fixed concurrency, as a replay sends them.

``N`` clients each send a request as soon as their previous one finished (the replay's
``max_concurrency`` window sends request ``i + N`` when a slot frees). Replayed as written,
N clients sending identical requests at t = 0 stay in lock-step for ever: every wave's
prefills queue behind each other and every TTFT is a whole wave's, where real clients drift
apart within a few requests (network and tokenizer jitter, requests finishing a step apart).
So the clients start spread: client ``i``'s first request is sent at a seeded uniform time
within one request's duration (``spread_ms``: the timing model's estimate of a request at
this concurrency), which is where real clients end up, and every client's first request is a
warm-up whose figures are left out, as the benchmarks exclude their warm-up requests. What is
measured is the loop once it runs: ``ROUNDS`` requests per client.
"""

from __future__ import annotations

from ..interfaces.model import Request

__all__ = ["ROUNDS", "closed_loop_requests"]

#: measured requests per client after its warm-up request
ROUNDS = 2


def closed_loop_requests(
    clients: int, isl: int, osl: int, *, seed: int = 0, spread_ms: float = 0.0
) -> tuple[list[Request], int]:
    """The requests of ``clients`` closed-loop clients and how many leading ones are warm-up."""
    import numpy as np

    rng = np.random.default_rng(seed)
    starts = sorted(rng.uniform(0.0, spread_ms, size=clients).tolist()) if spread_ms > 0 else [0.0] * clients
    total = clients * (1 + ROUNDS)
    requests = [
        Request(
            id=f"r{i}",
            prompt_tokens=isl,
            max_output_tokens=osl,
            arrival_ms=round(starts[i], 3) if i < clients else 0.0,
        )
        for i in range(total)
    ]
    return requests, clients
