"""Subprocess probe for the contract kit's cross-process determinism checks.

``python -m tickgate.testing.probe replay POLICY WORKLOAD`` prints the
replay report; ``mirror NAME FILE`` the observations document;
``reader NAME FILE`` the requests; ``gate POLICY BASELINE CANDIDATE`` the
gate report. Output is canonical JSON so two runs compare byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs

from .support import canonical


def main(argv: list[str]) -> int:
    what, *args = argv
    if what == "replay":
        from ..host.policy import load_policy
        from ..simulate import replay
        from ..workload.sources import open_requests

        requests, inputs = open_requests(Path(args[1]))
        out: Any = replay(requests, load_policy(args[0]), inputs=inputs)
    elif what == "mirror":
        from ..gate.inputs import load_observations

        out = load_observations(Path(args[1]), args[0])
    elif what == "reader":
        from ..workload.sources import open_requests

        stream, _ = open_requests(Path(args[1]), args[0])
        out = [attrs.asdict(r) for r in stream]
    elif what == "gate":
        from ..gate.pipeline import gate_files

        out = gate_files(args[0], baseline=args[1], candidate=args[2])
    else:
        print(f"unknown probe {what!r}", file=sys.stderr)
        return 2
    sys.stdout.write(canonical(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
