"""What a fleet replay says it ran on (issue 32): a data-parallel fleet said "on 1 replicas";
it now names the replicas and their data-parallel ranks, every count in the right number."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from tickgate.fleet.spec import fleet_shape
from tickgate.testing import run_cli
from tickgate.util.words import plural

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"


def pool(name: str = "default", replicas: int = 1, dp: int = 1, role: str = "mixed") -> dict[str, object]:
    return {"name": name, "role": role, "replicas": replicas, "data_parallel_size": dp}


@pytest.mark.parametrize(("pools", "said"), [
    ([pool(dp=4)], "1 replica with 4 data-parallel ranks"),
    ([pool(replicas=2, dp=4)], "2 replicas with 4 data-parallel ranks each"),
    ([pool()], "1 replica"),
    ([pool(replicas=3)], "3 replicas"),
    ([pool("prefill", 1, role="prefill"), pool("decode", 3, role="decode")], "4 replicas: 1 prefill, 3 decode"),
    ([pool("prefill", 2, 2, "prefill"), pool("decode", 1, 4, "decode")],
     "3 replicas: 2 prefill with 2 data-parallel ranks each, 1 decode with 4 data-parallel ranks"),
])
def test_the_shape_of_a_fleet_in_words(pools: list[dict[str, object]], said: str) -> None:
    assert fleet_shape(pools) == said


def test_counts_are_singular_for_one() -> None:
    assert [plural(n, "request") for n in (0, 1, 2)] == ["0 requests", "1 request", "2 requests"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"


@pytest.mark.parametrize(("preset", "said"), [
    ("fleet-dp.yaml", "replayed 5 requests on 1 replica with 4 data-parallel ranks: 5 completed"),
    ("fleet-pd.yaml", "replayed 5 requests on 4 replicas: 1 prefill, 3 decode (least-loaded): 5 completed"),
])
def test_the_replay_summary_names_the_ranks(tmp_path: Path, preset: str, said: str) -> None:
    res = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "5",
                  "--policy", str(REPO / "policies" / preset), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(said)


def test_one_request_on_one_engine_is_singular(tmp_path: Path) -> None:
    res = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "1",
                  "--policy", str(REPO / "policies" / "vllm-v1-bench.yaml"), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("replayed 1 request in ")
