"""Helpers shared by the trtllm adapter's tests: replay a policy built from options, find an outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tickgate import Request
from tickgate.host.policy import load_policy
from tickgate.simulate import replay


def run(tmp_path: Path, options: dict[str, Any], requests: list[Request],
        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "trtllm", "options": options}}
    doc.update(extra or {})
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return replay(requests, load_policy(path))


def outcome(report: dict[str, Any], rid: str) -> dict[str, Any]:
    return next(o for o in report["outcomes"] if o["id"] == rid)
