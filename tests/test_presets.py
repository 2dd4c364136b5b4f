"""The shipped presets say what they are (issue 32): a preset sized as a toy (a seed scheduler's 20
pages, a deliberately small pool) says so in its description, and every other engine preset
describes a real deployment: a named model on a named GPU, the KV pool sized from GPU memory
(``auto``) as the engine does. A toy-sized "bench" preset rejected 10-54 % of a Mooncake trace's
requests; a real one rejects none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES, run_cli
from tickgate.util.locations import load_yaml

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
#: the option of each engine's scheduler that sizes its KV pool
POOL = {"vllm-v1": "num_gpu_blocks", "sglang": "max_total_tokens", "trtllm": "kv_cache_max_tokens"}
ENGINE_PRESETS = sorted(p for p in POLICIES.glob("*.yaml")
                        if not p.name.startswith("gate-") and not p.name.startswith("fleet-"))
DEPLOYMENTS = [p for p in ENGINE_PRESETS if not load_yaml(p)[0]["description"].startswith("Toy")]


def test_presets_sized_as_toys_say_so() -> None:
    for path in ENGINE_PRESETS:
        doc = load_yaml(path)[0]
        options = doc["scheduler"].get("options", {})
        pool = POOL.get(doc["scheduler"]["name"])
        real = pool is not None and options.get(pool) == "auto"
        assert real or doc["description"].startswith("Toy"), f"{path.name}: a toy-sized preset not named a toy"
        assert real or "toy" in path.read_text(encoding="utf-8").split("version:")[0].lower(), \
            f"{path.name}: the file comment does not say it is a toy"


@pytest.mark.parametrize("path", DEPLOYMENTS, ids=lambda p: p.stem)
def test_a_deployment_preset_names_its_model_and_gpu(path: Path) -> None:
    doc = load_yaml(path)[0]
    timing = doc["timing"]
    assert timing["name"] == "roofline" and timing["options"]["model"] and timing["options"]["gpu"]
    assert doc["scheduler"]["options"][POOL[doc["scheduler"]["name"]]] == "auto"
    assert "H100" in doc["description"] and "Llama-3.1-8B" in doc["description"]


def test_the_engine_presets_users_start_from_are_deployments() -> None:
    names = {p.name for p in DEPLOYMENTS}
    assert {"vllm-v1-bench.yaml", "sglang-default.yaml", "trtllm-guaranteed-no-evict.yaml"} <= names


@pytest.mark.parametrize("preset", ["vllm-v1-bench.yaml", "sglang-default.yaml", "trtllm-guaranteed-no-evict.yaml"])
def test_a_deployment_preset_serves_the_mooncake_trace(tmp_path: Path, preset: str) -> None:
    """The command of issue 32: 300 Mooncake conversations (prompts up to 121k tokens) all fit."""
    res = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "300",
                  "--policy", str(POLICIES / preset), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert "300 completed, 0 rejected" in res.stdout
