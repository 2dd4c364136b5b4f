"""`tickgate validate` refuses every policy `tickgate replay` refuses (issue 32): the shipped presets,
and mutations of the fleet presets that replay refuses (an unknown router, data-parallel ranks on a
scheduler without them, a disaggregated fleet without transfer figures, a fleet without a timing
model, a decode pool whose scheduler cannot take transferred KV). Each is run through both
commands; they must agree, refusal for refusal."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, POLICIES, run_cli
from ruamel.yaml import YAML

Mutation = Callable[[dict[str, Any]], None]


def _router(doc: dict[str, Any]) -> None:
    doc["cluster"]["router"] = {"name": "no-such-router"}


def _seed_with_ranks(doc: dict[str, Any]) -> None:
    doc["scheduler"] = {"name": "seed"}
    doc.pop("requires", None)


def _no_transfer(doc: dict[str, Any]) -> None:
    del doc["cluster"]["transfer"]


def _no_timing(doc: dict[str, Any]) -> None:
    del doc["timing"]


def _trtllm_decode(doc: dict[str, Any]) -> None:
    doc["cluster"]["pools"]["decode"]["scheduler"] = {"name": "trtllm"}


MUTATIONS: list[tuple[str, str, Mutation]] = [
    ("fleet-round-robin.yaml", "unknown-router", _router),
    ("fleet-dp.yaml", "seed-with-dp-ranks", _seed_with_ranks),
    ("fleet-pd.yaml", "pd-without-transfer", _no_transfer),
    ("fleet-least-loaded.yaml", "fleet-without-timing", _no_timing),
    ("fleet-pd.yaml", "trtllm-decode-pool", _trtllm_decode),
]


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("w") / "w.json"
    res = run_cli("generate", "--requests", "12", "--input-len", "64:256", "--output-len", "4:16", "--rate", "4",
                  "--seed", "7", "--output", str(path))
    assert res.returncode == 0, res.stderr
    return path


def _both(policy: Path, workload: Path, out: Path) -> tuple[Any, Any]:
    validated = run_cli("validate", str(policy))
    replayed = run_cli("replay", "--input", str(workload), "--policy", str(policy), "--output", str(out), "--quiet")
    return validated, replayed


@pytest.mark.parametrize("name,what,mutate", MUTATIONS, ids=[m[1] for m in MUTATIONS])
def test_validate_refuses_what_replay_refuses(tmp_path: Path, workload: Path, name: str, what: str,
                                              mutate: Mutation) -> None:
    yaml = YAML()
    doc = yaml.load((POLICIES / name).read_text())
    mutate(doc)
    policy = tmp_path / f"{what}.yaml"
    buf = io.StringIO()
    yaml.dump(doc, buf)
    policy.write_text(buf.getvalue())
    validated, replayed = _both(policy, workload, tmp_path / "r.json")
    assert replayed.returncode == 2, f"replay accepts {what}: the mutation does not test anything"
    assert validated.returncode == 2, f"validate accepts {what}, which replay refuses: {replayed.stderr}"
    assert validated.stderr.strip() == replayed.stderr.strip()


@pytest.mark.parametrize("name", sorted(p.name for p in POLICIES.glob("*.yaml") if not p.name.startswith("gate")))
def test_every_shipped_preset_validates_and_replays(tmp_path: Path, workload: Path, name: str) -> None:
    timed = "timing" in YAML(typ="safe").load((POLICIES / name).read_text())
    # a policy without a timing model replays workloads in steps (arrival ticks), not in ms
    validated, replayed = _both(POLICIES / name, workload if timed else FIXTURES / "workload.json", tmp_path / "r.json")
    assert (validated.returncode, replayed.returncode) == (0, 0), validated.stderr + replayed.stderr
