"""``tickgate schema``: the combined policy schema checks shipped policies,
rejects a bad plugin option, includes third-party plugins, and is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import LIFO, POLICIES, run_cli

from tickgate.commands.cli import main
from tickgate.util.locations import load_yaml
from tickgate.testing import make_dist


def _schema(capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["schema"]) == 0
    return json.loads(capsys.readouterr().out)


def _errors(schema: dict, policy: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(policy)]


def test_schema_is_valid_and_accepts_every_shipped_policy(capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema(capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    names = [c["properties"]["name"]["const"] for c in schema["properties"]["scheduler"]["oneOf"]]
    assert names == sorted(names) and {"seed", "vllm-v1", "sglang", "trtllm"} <= set(names)
    for path in sorted(POLICIES.glob("*.yaml")):
        doc, _ = load_yaml(path)
        assert _errors(schema, doc) == [], path.name


def test_schema_rejects_a_bad_option_of_a_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema(capsys)
    doc, _ = load_yaml(POLICIES / "default.yaml")
    assert _errors(schema, doc) == []
    doc["scheduler"]["options"]["page_size"] = 0
    assert _errors(schema, doc)
    doc["scheduler"]["options"]["page_size"] = 16
    doc["scheduler"]["name"] = "no-such-scheduler"
    assert _errors(schema, doc)
    gate, _ = load_yaml(POLICIES / "gate-default.yaml")
    gate["gate"]["signals"][0]["options"] = {"max_mismatch_rate": 7}
    assert _errors(schema, gate)


def test_output_file_matches_stdout_and_is_deterministic(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(_schema(capsys), indent=2, sort_keys=True) + "\n"
    out = tmp_path / "policy.schema.json"
    assert main(["schema", "--output", str(out)]) == 0
    assert out.read_text() == text
    assert main(["schema", "--output", str(out)]) == 0
    assert out.read_text() == text


def test_third_party_plugin_options_appear(tmp_path: Path) -> None:
    source = LIFO.replace('name = "lifo"', 'name = "lifo"\n        options_schema = {"type": "object", '
                          '"additionalProperties": False, "properties": {"depth": {"type": "integer"}}}')
    env = make_dist(tmp_path / "site", "toy-adapter", "1.2.3", "toy_adapter", source)
    res = run_cli("schema", env=env)
    assert res.returncode == 0, res.stderr
    (lifo,) = [c for c in res.json()["properties"]["admission"]["oneOf"]
               if c["properties"]["name"]["const"] == "lifo"]
    assert lifo["properties"]["options"]["properties"] == {"depth": {"type": "integer"}}
    assert "toy-adapter 1.2.3" in lifo["description"]
