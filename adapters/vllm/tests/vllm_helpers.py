"""Shared by the vllm-v1 tests: a replay through the registered plugin with its observer on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tickgate import Request


def mirror_run(requests: list[Request], options: dict, timing: Any = None) -> tuple[dict, list[dict], list]:
    """The vllm-v1 mirror after replaying ``requests``: its summary, its observed lines, its records."""
    return mirror_run_outcomes(requests, options, timing)[:3]  # type: ignore[return-value]


def mirror_run_outcomes(requests: list[Request], options: dict, timing: Any = None
                        ) -> tuple[dict, list[dict], list, list]:
    """:func:`mirror_run`, and the request outcomes."""
    from tickgate.interfaces import BuildContext, Clock
    from tickgate.host.registry import get_registry
    from tickgate.replay.engine import run

    clock = Clock()
    ctx = BuildContext(clock=clock, timing=timing, make_kv_allocator=None, make_admission=None)
    mirror = get_registry().get("scheduler", "vllm-v1").obj.build(options, ctx)
    lines: list[dict] = []
    mirror.observer = lines.append
    records: list = []
    outcomes: list = []

    class _Sink:
        def arrival(self, request):
            pass

        def record(self, record):
            records.append(record)

        def outcome(self, outcome):
            outcomes.append(outcome)

    run(requests, mirror, clock, [_Sink()], timed=timing is not None, label="vllm-v1")
    return mirror.extra_summary(), lines, records, outcomes


def replay_reports_across_hash_seeds(doc: dict, tmp_path: Path, seeds: tuple[str, ...],
                                     options: dict | None = None) -> list[bytes]:
    """``tickgate replay`` of a recorded harness workload ``doc`` (token ids, its config as the
    vllm-v1 options, with ``options`` on top; linear timing), once per ``PYTHONHASHSEED`` in
    ``seeds``: the reports' bytes."""
    workload = {"version": 1, "requests": [
        {"id": r["id"], "prompt_tokens": len(r["prompt_token_ids"]), "prompt_token_ids": r["prompt_token_ids"],
         "max_output_tokens": r["max_output_len"], "arrival_tick": r["arrival_step"]} for r in doc["requests"]]}
    (tmp_path / "w.json").write_text(json.dumps(workload))
    policy = {"version": 1, "scheduler": {"name": "vllm-v1", "options": {**doc["config"], **(options or {})}},
              "timing": {"name": "linear", "options": {"fixed_ms": 5, "per_prefill_token_ms": 0.02,
                                                       "per_decode_seq_ms": 0.1}}}
    (tmp_path / "p.yaml").write_text(json.dumps(policy))
    outs = []
    for seed in seeds:
        out = tmp_path / f"r{seed}-{len(options or {})}.json"
        res = subprocess.run([sys.executable, "-m", "tickgate", "replay", "--input", str(tmp_path / "w.json"),
                              "--policy", str(tmp_path / "p.yaml"), "--output", str(out), "--quiet"],
                             env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
    return outs
