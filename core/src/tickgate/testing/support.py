"""Helpers shared by the contract classes: a fresh registry, a deterministic
workload, policy files written for a test, and a probe run in a separate
interpreter (so determinism is checked across ``PYTHONHASHSEED``, not only
within one process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..host.registry import Registry, get_registry, reset_registry
from ..util.errors import TickgateError


def fresh_registry() -> Registry:
    """The registry loaded from installed entry points, reloaded from scratch."""
    reset_registry()
    return get_registry()


def contract_workload(count: int = 24) -> dict[str, Any]:
    """A small deterministic workload (``schemas/workload.schema.json``):
    mixed prompt lengths and priorities, two tenants, staggered arrivals,
    prefix blocks of 16 tokens shared in pairs. Small enough for every
    shipped policy's KV cache."""
    requests = []
    for i in range(count):
        prompt = 16 + (i * 37) % 96
        requests.append(
            {
                "id": f"r{i:03d}",
                "prompt_tokens": prompt,
                "max_output_tokens": 2 + (i * 5) % 7,
                "priority": (i * 3) % 4,
                "arrival_tick": i // 3,
                "tenant": "a" if i % 2 else "b",
                "prefix_blocks": [1000 + i // 2] * (prompt // 16),
            }
        )
    return {
        "version": 1,
        "description": "tickgate.testing contract workload",
        "block_size": 16,
        "requests": requests,
    }


def write_json(path: Path, data: Any) -> Path:
    """JSON is also YAML: policy files written this way load with locations."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def probe(*args: str, hash_seed: str, env: Mapping[str, str] | None = None) -> str:
    """Run ``python -m tickgate.testing.probe ARGS`` under ``PYTHONHASHSEED``; its stdout."""
    full = dict(os.environ)
    full.update(env or {})
    full["PYTHONHASHSEED"] = hash_seed
    proc = subprocess.run(
        [sys.executable, "-m", "tickgate.testing.probe", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
    )
    if proc.returncode != 0:
        raise AssertionError(f"probe {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def other_hash_seed() -> str:
    """A ``PYTHONHASHSEED`` different from this process's: comparing the
    in-process result with one probe under it catches set/dict-order leaks
    (one subprocess, not two: the machine is shared and start-up dominates)."""
    return "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"


def across_hash_seeds(*args: str) -> list[str]:
    """The probe's output under another hash seed (a list, so callers loop)."""
    return [probe(*args, hash_seed=other_hash_seed())]


def clean_failure(call: Any, *args: Any) -> tuple[Any, TickgateError | None]:
    """Call; a TickgateError is a clean failure, anything else fails the test."""
    try:
        return call(*args), None
    except TickgateError as exc:
        return None, exc
    except Exception as exc:
        raise AssertionError(
            f"{getattr(call, '__qualname__', call)} raised {type(exc).__name__}: {exc}; "
            "bad input must raise tickgate.util.errors.InputError (or another TickgateError)"
        ) from exc


def garbage_files(directory: Path, sample: Path | None) -> Iterator[Path]:
    """Inputs no reader should crash on: empty, binary, not-quite-text, and a
    sample cut in half and with its middle byte corrupted."""
    directory.mkdir(parents=True, exist_ok=True)
    cases: dict[str, bytes] = {
        "empty.txt": b"",
        "binary.bin": bytes(range(256)) * 4,
        "latin1.txt": "caf\xe9,\xff\n".encode("latin-1"),
        "braces.json": b"{[}\n",
    }
    if sample is not None:
        data = sample.read_bytes()
        cases["truncated-" + sample.name] = data[: len(data) // 2]
        if data:
            mid = len(data) // 2
            cases["corrupt-" + sample.name] = data[:mid] + b'\x00"{' + data[mid + 1 :]
    for name, payload in sorted(cases.items()):
        path = directory / name
        path.write_bytes(payload)
        yield path
