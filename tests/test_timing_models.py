"""Timing models as plugins (issue 20): a third party's model, installed as a distribution, is selected
by ``timing: {name, options}`` and times a replay; the short spelling (four fields under ``timing:``)
is ``name: linear`` to the byte; unknown names and bad options are located errors; a model with only
``step_ms`` prices the seed scheduler's and vllm-v1's decode spans exactly as linear's closed form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, POLICIES, TOYS

from tickgate.commands.cli import main
from tickgate.host.policy import load_policy

COEFFICIENTS = {"fixed_ms": 4.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.15,
                "per_context_token_ms": 0.0002}

#: a third-party distribution's models: the linear formula through step_ms alone (spans priced by the
#: base), and one whose build refuses an option
MODELS = """
    from tickgate import ConfigError, TimingModel, hookimpl

    KEYS = ("fixed_ms", "per_prefill_token_ms", "per_decode_seq_ms", "per_context_token_ms")

    class Coefficients(TimingModel):
        name = "coefficients"
        description = "the linear formula through step_ms alone"
        options_schema = {"type": "object", "additionalProperties": False,
                          "properties": {k: {"type": "number", "minimum": 0} for k in KEYS}}

        def step_ms(self, prefill_tokens, decode_seqs, context_tokens):
            o = self.options
            return (float(o.get("fixed_ms", 0)) + float(o.get("per_prefill_token_ms", 0)) * prefill_tokens
                    + float(o.get("per_decode_seq_ms", 0)) * decode_seqs
                    + float(o.get("per_context_token_ms", 0)) * context_tokens)

    class Gpu(TimingModel):
        name = "gpu"
        description = "a model that knows one GPU"
        options_schema = {"type": "object", "required": ["gpu"], "properties": {"gpu": {"type": "string"}}}

        @classmethod
        def build(cls, options):
            if options["gpu"] != "h100":
                raise ConfigError(f"unknown gpu {options['gpu']!r}; known: h100")
            return super().build(options)

        def step_ms(self, prefill_tokens, decode_seqs, context_tokens):
            return 1.0

    class Broken(TimingModel):
        name = "broken"
        description = "fails while it is built"

        @classmethod
        def build(cls, options):
            raise RuntimeError("no tables")

    @hookimpl
    def register_timing_models(register):
        register(Coefficients)
        register(Gpu)
        register(Broken)
"""


@pytest.fixture
def models(tickgate_dist: Any) -> None:
    tickgate_dist("tickgate-timing-models", "0.3", "tickgate_timing_models", MODELS)


def policy(tmp_path: Path, base: str, timing: Any, name: str = "p.yaml") -> Path:
    """``policies/<base>`` (or the toy copy ``fixtures/policies/<base>``) with its timing section
    replaced (JSON is YAML: lines stay known)."""
    from tickgate.util.locations import load_yaml

    doc, _ = load_yaml(TOYS / base if (TOYS / base).exists() else POLICIES / base)
    doc = dict(doc)
    doc["timing"] = timing
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def replay_bytes(policy_path: Path, workload: Path, tmp_path: Path, *extra: str) -> bytes:
    out = tmp_path / "r.json"
    assert main(["replay", "--input", str(workload), "--policy", str(policy_path), "--output", str(out),
                 "--quiet", *extra]) == 0
    return out.read_bytes()


def error_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def test_both_spellings_give_byte_identical_reports(tmp_path: Path) -> None:
    workload = FIXTURES / "scenarios" / "kv-pressure.json"
    for base in ("vllm-v1-toy.yaml", "sglang-toy.yaml"):  # pools the kv-pressure scenario fills
        # the same path for both spellings: the report names the policy file
        short = replay_bytes(policy(tmp_path, base, COEFFICIENTS), workload, tmp_path, "--trace",
                             str(tmp_path / "short.jsonl"))
        named = replay_bytes(policy(tmp_path, base, {"name": "linear", "options": COEFFICIENTS}), workload,
                             tmp_path, "--trace", str(tmp_path / "named.jsonl"))
        assert short == named
        assert (tmp_path / "short.jsonl").read_bytes() == (tmp_path / "named.jsonl").read_bytes()
        assert json.loads(short)["inputs"]["timing"] == {"name": "linear", "options": COEFFICIENTS}


@pytest.mark.parametrize("base, workload", [
    ("default.yaml", "workload.json"),
    ("vllm-v1-toy.yaml", "scenarios/kv-pressure.json"),
])
def test_a_third_party_model_times_a_replay(models: None, tmp_path: Path, base: str, workload: str) -> None:
    """``coefficients`` has only ``step_ms``: the seed scheduler's and vllm-v1's decode spans go through
    the base's ``decode_span``, and every byte but ``inputs.timing`` is linear's."""
    linear = json.loads(replay_bytes(policy(tmp_path, base, COEFFICIENTS), FIXTURES / workload, tmp_path))
    mine = json.loads(replay_bytes(policy(tmp_path, base, {"name": "coefficients", "options": COEFFICIENTS}),
                                   FIXTURES / workload, tmp_path))
    assert mine["inputs"].pop("timing") == {"name": "coefficients", "options": COEFFICIENTS}
    assert linear["inputs"].pop("timing") == {"name": "linear", "options": COEFFICIENTS}
    assert mine == linear and mine["latency"]["busy_ms"] > 0


def test_plugins_and_schema_show_third_party_models(models: None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("timing_model")]
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("broken", "tickgate-timing-models", "0.3"), ("coefficients", "tickgate-timing-models", "0.3"),
        ("gpu", "tickgate-timing-models", "0.3"), ("linear", "tickgate", "0.1.0"),
        ("roofline", "tickgate", "0.1.0")]
    assert main(["schema"]) == 0
    choices = json.loads(capsys.readouterr().out)["properties"]["timing"]["oneOf"]
    names = [c["properties"]["name"]["const"] for c in choices if "name" in c["properties"]]
    assert names == ["broken", "coefficients", "gpu", "linear", "roofline"]
    short = [c for c in choices if "name" not in c["properties"]]
    assert len(short) == 1 and sorted(short[0]["properties"]) == sorted([*COEFFICIENTS, "frontend_ms"])


def test_the_schema_takes_both_spellings_and_refuses_bad_coefficients(
        capsys: pytest.CaptureFixture[str]) -> None:
    import jsonschema

    from tickgate.util.locations import load_yaml

    assert main(["schema"]) == 0
    validator = jsonschema.Draft202012Validator(json.loads(capsys.readouterr().out))
    doc, _ = load_yaml(POLICIES / "default.yaml")
    for timing, ok in ((COEFFICIENTS, True), ({"name": "linear", "options": COEFFICIENTS}, True), ({}, True),
                       ({"fixed_ms": -1}, False), ({"name": "linear", "options": {"fixed_ms": -1}}, False),
                       ({"name": "linear", "fixed_ms": 1}, False), ({"name": "nope"}, False)):
        assert validator.is_valid({**doc, "timing": timing}) is ok, timing


def test_an_unknown_model_is_located_and_lists_the_known_ones(models: None, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = policy(tmp_path, "default.yaml", {"name": "vidur", "options": {}})
    line = error_line(capsys, "validate", str(path))
    assert line.startswith(f"error: {path}:")
    assert line.endswith(': $.timing.name: unknown timing_model "vidur"; '
                         "available: broken, coefficients, gpu, linear, roofline")


@pytest.mark.parametrize("timing, where", [
    ({"name": "linear", "options": {"fixed_ms": -1}},
     "$.timing.options.fixed_ms: -1 is less than the minimum of 0"),
    ({"fixed_ms": -1}, "$.timing.fixed_ms: -1 is less than the minimum of 0"),
    ({"fixd_ms": 1}, "$.timing: unknown key 'fixd_ms'; expected one of: fixed_ms, frontend_ms, "
                     "per_context_token_ms, per_decode_seq_ms, per_prefill_token_ms"),
    ({"name": "linear", "fixed_ms": 1}, "$.timing: unknown key 'fixed_ms'; expected one of: name, options"),
])
def test_bad_options_are_located_in_either_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    timing: Any, where: str) -> None:
    path = policy(tmp_path, "default.yaml", timing)
    line = error_line(capsys, "validate", str(path))
    assert line.startswith(f"error: {path}:") and line.endswith(where), line
    _, at, _ = line[len(f"error: {path}:"):].split(":", 2)
    assert at.isdigit()  # a line and a column in the file


def test_a_refused_configuration_is_located_and_a_crash_names_the_plugin(
        models: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = policy(tmp_path, "default.yaml", {"name": "gpu", "options": {"gpu": "a100"}})
    line = error_line(capsys, "validate", str(path))
    assert line.endswith(": $.timing.name: unknown gpu 'a100'; known: h100") and f"{path}:" in line
    assert load_policy(policy(tmp_path, "default.yaml", {"name": "gpu", "options": {"gpu": "h100"}})
                       ).timing.step_ms(1, 1, 1) == 1.0
    path = policy(tmp_path, "default.yaml", {"name": "broken"})
    assert error_line(capsys, "validate", str(path)) == (
        'error: timing_model "broken" from tickgate-timing-models 0.3 failed: RuntimeError: no tables')


def test_validate_names_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(policy(tmp_path, "default.yaml", COEFFICIENTS))]) == 0
    assert capsys.readouterr().out.strip().endswith("(scheduler=seed; admission=priority-fcfs; "
                                                    "kv_allocator=paged; timing=linear)")


def test_linear_frontend_ms_adds_to_every_request_s_ttft_and_end_and_is_left_out_at_0(tmp_path: Path) -> None:
    """A server's time outside its steps: per request, not per step; a policy without it keeps
    its report's inputs.timing as it was."""
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay
    from tickgate.workload.sources import open_requests

    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"version": 1, "requests": [
        {"id": f"r{i}", "prompt_tokens": 100, "max_output_tokens": 5, "arrival_ms": 1000.0 * i} for i in range(4)]}))
    reports = {}
    for front in (0.0, 25.0):
        options: dict[str, Any] = {"fixed_ms": 15.0, "per_prefill_token_ms": 0.05}
        if front:
            options["frontend_ms"] = front
        path = policy(tmp_path, "default.yaml", {"name": "linear", "options": options})
        requests, inputs = open_requests(workload)
        reports[front] = replay(requests, load_policy(path), inputs=inputs)
    plain, fronted = reports[0.0], reports[25.0]
    assert "frontend_ms" not in plain["inputs"]["timing"]["options"]
    assert fronted["inputs"]["timing"]["options"]["frontend_ms"] == 25.0
    for key in ("ttft_ms", "e2e_ms"):
        assert fronted["latency"][key]["p50"] == pytest.approx(plain["latency"][key]["p50"] + 25.0)
    assert fronted["summary"]["trace_fingerprint"] == plain["summary"]["trace_fingerprint"]  # the steps did not move
