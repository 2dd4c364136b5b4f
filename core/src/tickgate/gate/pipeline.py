"""The gate in one call, for the CLI and for embedding: policy + two sides -> report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..host.policy import load_policy
from ..host.registry import Registry, get_registry
from ..util.progress import OFF, Progress
from .comparison import join
from .config import GateConfig, load_gate_config
from .decision import evaluate
from .inputs import read_bundle, read_side
from .observations import Side
from .report import build_report
from .segments import segment_summaries


def run_gate(baseline: Side, candidate: Side, config: GateConfig, progress: Progress = OFF) -> dict[str, Any]:
    comparison = join(baseline, candidate, seed=config.seed)
    progress.step("joined")
    outcomes = evaluate(config, comparison, progress)
    return build_report(config, comparison, outcomes, segment_summaries(comparison, config.segments))


def gate_files(
    policy_path: Path | str,
    *,
    bundle: Path | str | None = None,
    baseline: Path | str | None = None,
    candidate: Path | str | None = None,
    format: str = "auto",
    registry: Registry | None = None,
    progress: Progress = OFF,
) -> dict[str, Any]:
    """Read the inputs, validate the policy first (cheap errors before big reads), gate.
    ``progress`` counts the stages: reading, joining, each signal."""
    config = load_gate_config(load_policy(policy_path, registry=registry), registry)
    progress.expect(2 + len(config.signals))
    if bundle is not None:
        base, cand = read_bundle(bundle)
    else:
        assert baseline is not None and candidate is not None
        from .sides import read_pair, worth_it

        if registry is None and worth_it(Path(baseline), Path(candidate)):
            get_registry()  # loaded once here, inherited by the child
            base, cand = read_pair(Path(baseline), Path(candidate), format)
        else:
            base = read_side(baseline, "baseline", format, registry=registry)
            cand = read_side(candidate, "candidate", format, registry=registry)
    progress.step("read")
    return run_gate(base, cand, config, progress)
