"""Helpers the admission-policy tests share (a helper module, not a test module):
replay a fixture workload under a policy in-process, and edit a shipped policy's text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests

REPO = Path(__file__).resolve().parents[1]
ADM = REPO / "fixtures" / "admission"
POLICIES = REPO / "policies"


def run(workload: str | Path, policy: str | Path, tmp: Path | None = None) -> dict[str, Any]:
    """Replay in-process; ``policy`` is a path or, with ``tmp``, the YAML text itself."""
    if tmp is not None:
        path = tmp / "policy.yaml"
        path.write_text(str(policy))
        policy = path
    workload = Path(workload) if Path(workload).is_absolute() else ADM / f"{workload}.json"
    requests, inputs = open_requests(workload, "workload", block_size=None, limit=None)
    return replay(requests, load_policy(policy), inputs=inputs)


def policy_text(name: str, **swap: str) -> str:
    text = (POLICIES / f"{name}.yaml").read_text()
    for old, new in swap.items():
        assert old in text
        text = text.replace(old, new)
    return text
