"""Regenerate the example's sample files (seeded: the same bytes every time).

    python samples/make_samples.py

* ``baseline.csv``: 240 requests of the example engine.
* ``candidate.csv``: the same traffic on a new build: same outputs, latency
  within noise -> the gate promotes.
* ``candidate-slow.csv``: same outputs, every latency +35% -> the gate holds.
* ``workload.json``: 40 requests with very different prompt lengths for the replay.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = "request_id,latency_ms,ttft_ms,tokens_out,error,output_sha"


def write_run(path: Path, seed: int, scale: float, version: str | None) -> None:
    rng = random.Random(seed)
    lines = ([f"# example-csv {version}"] if version else []) + [HEADER]
    for i in range(240):
        tokens = 32 + (i * 17) % 96
        latency = round((300 + tokens * 6) * scale * rng.uniform(0.97, 1.03), 3)
        ttft = round((25 + (i % 7) * 3) * scale * rng.uniform(0.97, 1.03), 3)
        sha = hashlib.sha256(f"answer {i}".encode()).hexdigest()
        lines.append(f"req-{i:04d},{latency},{ttft},{tokens},,{sha}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_workload(path: Path) -> None:
    requests = []
    for i in range(40):
        prompt = [512, 24, 48, 300, 16, 96][i % 6] + i
        requests.append({"id": f"w{i:03d}", "prompt_tokens": prompt, "max_output_tokens": 4 + i % 5,
                         "arrival_tick": i // 4})
    doc = {"version": 1, "description": "mixed prompt lengths for shortest-prompt-aging", "requests": requests}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_run(HERE / "baseline.csv", seed=1, scale=1.0, version=None)
    write_run(HERE / "candidate.csv", seed=2, scale=1.0, version="v1")
    write_run(HERE / "candidate-slow.csv", seed=3, scale=1.35, version="v1")
    write_workload(HERE / "workload.json")
