"""Shared helpers for the reader tests: an isolated registry holding exactly
the reader plugin modules (registered as their entry points would), so these
tests do not depend on unrelated plugins in the working tree."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from tickgate.host.registry import Registry

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "fixtures" / "realdata"
INVALID = REPO / "fixtures" / "invalid"

_MODULES = (("tickgate.readers.builtin_mirrors", "tickgate", "readers"), ("tickgate_vllm.plugin", "tickgate-vllm", "vllm"),
            ("tickgate_sglang.plugin", "tickgate-sglang", "sglang"), ("tickgate_trtllm.plugin", "tickgate-trtllm", "trtllm"))


def registry() -> Registry:
    reg = Registry()
    for module, dist, ep in _MODULES:
        reg.register_module(importlib.import_module(module), distribution=dist, version="0.1.0", entry_point=ep)
    return reg


def read(path: Path | str, fmt: str = "auto") -> dict[str, Any]:
    from tickgate.gate.detect import read_observations

    return read_observations(path, fmt, registry())
