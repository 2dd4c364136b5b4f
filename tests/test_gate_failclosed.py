"""The gate fails closed: for every signal, missing or unreadable evidence is
a hold (or an error), never a pass; a broken signal plugin is an error naming
it and its distribution; policy mistakes are located in the policy file."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import FIXTURES, POLICIES

from tickgate.util.errors import InputError, PluginError
from tickgate.gate.pipeline import run_gate
from tickgate.gate.config import load_gate_config
from tickgate.gate.observations import side_from_document
from tickgate.interfaces.gate import GateSignal, SignalResult
from tickgate.host.hookspecs import hookimpl
from tickgate.host.registry import Registry
from tickgate.host.policy import load_policy

SAFE = json.loads((FIXTURES / "release_gate_safe.json").read_text())
STREAMING = json.loads((FIXTURES / "gate/streaming_tokens.json").read_text())
NUMERIC = json.loads((FIXTURES / "gate/numeric_within_scope.json").read_text())

Bundle = dict[str, Any]


def builtin_registry(*extra: Any) -> Registry:
    from tickgate.gate.signals import builtin_signals as plugin

    reg = Registry()
    reg.register_module(plugin, distribution="tickgate", version="0")
    for module in extra:
        reg.register_module(module, distribution="evil-dist", version="0.1")
    return reg


def policy(tmp_path, body: str) -> Any:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\ngate:\n  signals:\n" + body, encoding="utf-8")
    return path


def gate_bundle(bundle: Bundle, policy_path: Any, registry: Registry | None = None) -> dict[str, Any]:
    registry = registry or builtin_registry()
    config = load_gate_config(load_policy(policy_path, registry=registry), registry)
    return run_gate(side_from_document(bundle["baseline"], "baseline", "b"),
                    side_from_document(bundle["candidate"], "candidate", "c"), config)


def drop(field: str, every: int = 1, side: str = "candidate") -> Callable[[Bundle], Bundle]:
    def change(bundle: Bundle) -> Bundle:
        out = copy.deepcopy(bundle)
        for name in (("baseline", "candidate") if side == "both" else (side,)):
            for i, r in enumerate(out[name]["requests"]):
                if i % every == 0:
                    r.pop(field, None)
        return out
    return change


def aggregate_only(bundle: Bundle) -> Bundle:
    out = copy.deepcopy(bundle)
    for side in ("baseline", "candidate"):
        out[side].pop("requests")
    return out


def disjoint(bundle: Bundle) -> Bundle:
    out = copy.deepcopy(bundle)
    for r in out["candidate"]["requests"]:
        r["request_id"] = "other-" + r["request_id"]
    return out


OPTIONS = {"route-evidence": "{required: [/v1/chat/completions, /v1/completions]}",
           "numeric-drift": "{default: {abs: 0.001}}"}
SOURCE = {"numeric-drift": NUMERIC, "streaming-evidence": STREAMING}

#: signal -> ways its evidence can be missing
CASES: list[tuple[str, str, Callable[[Bundle], Bundle]]] = [
    ("output-mismatch", "no fingerprints", drop("output_fingerprint")),
    ("output-mismatch", "some fingerprints", drop("output_fingerprint", every=40, side="baseline")),
    ("numeric-drift", "no output values", drop("output_values", every=7)),
    ("latency-p95", "some latencies", drop("latency_ms", every=50)),
    ("latency-p95", "no latencies", drop("latency_ms", side="baseline")),
    ("ttft-p95", "some ttft", drop("ttft_ms", every=30)),
    ("decode-token-p95", "no inter-token latency", drop("itl_p95_ms")),
    ("memory-pressure", "some memory pressure", drop("memory_pressure", every=3)),
    ("route-evidence", "no routes", drop("route", side="both")),
    ("scheduler-evidence", "no candidate scheduler", drop("scheduler", every=9)),
    ("streaming-evidence", "no streams", drop("streaming", every=11)),
]
SIGNALS = ["output-mismatch", "numeric-drift", "error-rate", "latency-p95", "ttft-p95", "decode-token-p95",
           "memory-pressure", "route-evidence", "scheduler-evidence", "streaming-evidence", "matched-traffic"]


def _one_signal(tmp_path, name: str) -> Any:
    options = f"\n      options: {OPTIONS[name]}" if name in OPTIONS else ""
    return policy(tmp_path, f"    - name: {name}{options}\n")


@pytest.mark.parametrize("name,what,change", CASES, ids=[f"{n}:{w}" for n, w, _ in CASES])
def test_missing_evidence_holds(tmp_path, name, what, change):
    source = SOURCE.get(name, SAFE)
    path = _one_signal(tmp_path, name)
    assert gate_bundle(source, path)["decision"] == "promote"  # the untouched data passes
    report = gate_bundle(change(source), path)
    assert report["decision"] == "hold"
    assert report["signals"][0]["status"] == "hold"
    assert report["signals"][0]["reason"] in ("missing_evidence", "insufficient_data")
    assert report["triage"][0]["next_action"]


@pytest.mark.parametrize("name", SIGNALS)
def test_no_per_request_join_and_no_aggregates_holds_every_signal(tmp_path, name):
    """Signals with nothing on either side stand aside (not evaluated); a gate
    where no signal could be evaluated still holds, never promotes."""
    report = gate_bundle(aggregate_only(SOURCE.get(name, SAFE)), _one_signal(tmp_path, name))
    assert report["signals"][0]["status"] in ("hold", "not_evaluated"), report["signals"][0]
    assert report["decision"] == "hold"


@pytest.mark.parametrize("name", SIGNALS)
def test_no_matched_traffic_holds_every_signal(tmp_path, name):
    report = gate_bundle(disjoint(SOURCE.get(name, SAFE)), _one_signal(tmp_path, name))
    assert report["join"]["matched"] == 0
    assert report["signals"][0]["status"] == "hold", report["signals"][0]


def test_all_signals_dry_run_holds_rather_than_promotes(tmp_path):
    report = gate_bundle(SAFE, policy(tmp_path, "    - name: error-rate\n      dry_run: true\n"))
    assert report["decision"] == "hold"
    assert "every signal is dry-run" in report["notes"][0]


# -- misbehaving plugins ----------------------------------------------------------------

class Raises(GateSignal):
    name = "boom"

    def evaluate(self, comparison: Any) -> SignalResult:
        raise ZeroDivisionError("division by zero")


class ReturnsDict(GateSignal):
    name = "dicty"

    def evaluate(self, comparison: Any) -> Any:
        return {"status": "pass"}


class ReturnsNaN(GateSignal):
    name = "nanny"

    def evaluate(self, comparison: Any) -> Any:
        result = SignalResult(status="pass", reason="ok", message="fine")
        object.__setattr__(result, "delta", math.nan)  # bypassing the constructor's check
        return result


class ReturnsBadEvidence(GateSignal):
    name = "counts"

    def evaluate(self, comparison: Any) -> Any:
        return SignalResult(status="pass", reason="ok", message="fine", evidence={"pairs": 1.5})


class FailsToBuild(GateSignal):
    name = "unbuildable"

    @classmethod
    def build(cls, options: Any) -> Any:
        raise RuntimeError("no GPU")


class EvilModule:
    @staticmethod
    @hookimpl
    def register_gate_signals(register):
        for cls in (Raises, ReturnsDict, ReturnsNaN, ReturnsBadEvidence, FailsToBuild):
            register(cls)


@pytest.mark.parametrize("name,message", [
    ("boom", r'gate signal "boom" from evil-dist 0.1 failed: ZeroDivisionError: division by zero'),
    ("dicty", r'gate signal "dicty" from evil-dist 0.1 returned dict, not a SignalResult'),
    ("nanny", r'gate signal "nanny" from evil-dist 0.1 returned invalid data: delta must be a finite number'),
    ("counts", r'gate signal "counts" from evil-dist 0.1 returned invalid data: evidence must map names'),
    ("unbuildable", r'gate signal "unbuildable" from evil-dist 0.1 failed to build: RuntimeError: no GPU'),
])
def test_broken_signal_plugins_are_errors_naming_plugin_and_distribution(tmp_path, name, message):
    with pytest.raises(PluginError, match=message):
        gate_bundle(SAFE, policy(tmp_path, f"    - name: {name}\n"), builtin_registry(EvilModule))


def test_signal_result_refuses_bad_values_at_construction():
    with pytest.raises(ValueError):
        SignalResult(status="maybe", reason="x", message="y")
    with pytest.raises(ValueError):
        SignalResult(status="pass", reason="x", message="y", baseline=math.inf)


# -- policy errors are located ---------------------------------------------------------------

@pytest.mark.parametrize("body,line,where,text", [
    ("    - name: latency-p59\n", 4, "$.gate.signals[0].name", 'unknown gate_signal "latency-p59"; available: '),
    ("    - name: latency-p95\n      options: {threshold: -1}\n", 5, "$.gate.signals[0].options.threshold",
     "-1 is less than the minimum of 0"),
    ("    - name: error-rate\n      option: {}\n", 4, "$.gate.signals[0]", "unknown key 'option'"),
    ("    - name: error-rate\n    - name: error-rate\n", 5, "$.gate.signals[1]", "signal id 'error-rate' is used twice"),
    ("    - name: numeric-drift\n      options:\n        tolerances:\n          - scope: {model: m}\n"
     "          - scope: {model: m}\n", 5, "$.gate.signals[0].options", "repeats the scope model=m"),
])
def test_policy_mistakes_are_located(tmp_path, body, line, where, text):
    path = policy(tmp_path, body)
    registry = builtin_registry()
    with pytest.raises(InputError) as err:
        load_gate_config(load_policy(path, registry=registry), registry)
    assert err.value.json_path == where
    assert err.value.line == line and err.value.column is not None
    assert text in err.value.message


def test_policy_without_a_gate_section_is_an_input_error(tmp_path):
    path = tmp_path / "nogate.yaml"
    path.write_text("version: 1\ndescription: replay only\n")
    with pytest.raises(InputError, match="no 'gate' section"):
        load_gate_config(load_policy(path, registry=builtin_registry()), builtin_registry())


def test_shipped_gate_policies_validate():
    registry = builtin_registry()
    names = sorted(p.name for p in POLICIES.glob("gate-*.yaml"))
    assert names == ["gate-aggregate.yaml", "gate-default.yaml", "gate-numeric.yaml", "gate-small-sample.yaml",
                     "gate-streaming.yaml"]
    for name in names:
        config = load_gate_config(load_policy(POLICIES / name, registry=registry), registry)
        assert config.signals and config.seed == 20250101


@pytest.mark.parametrize("failing", [1, 50, 240])
@pytest.mark.parametrize("layout", ["compact", "pretty"])
def test_candidate_errors_always_roll_back(tmp_path: Path, failing: int, layout: str) -> None:
    """Seen once in review while the gate's fast reading path was being edited:
    a bundle whose candidate requests all carried an error promoted. Whatever the
    reading path (one-shape batches, per-request fallback) and layout, errors
    only on the candidate roll back and name error-rate."""
    from conftest import run_cli

    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    for row in bundle["candidate"]["requests"][:failing]:
        row["error"] = "boom"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle, indent=2 if layout == "pretty" else None))
    res = run_cli("gate", "--input", str(path), "--output", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert res.returncode == 20 and report["decision"] == "rollback", res.stdout
    signal = next(s for s in report["signals"] if s["signal"] == "error-rate")
    assert signal["status"] == "rollback"
    assert "error-rate" in {t["signal"] for t in report["triage"]}
