"""One test per hook (tickgate.host.hookspecs.HOOK_KINDS): register a tiny
in-process plugin through the hook and exercise it through the code path
users hit (replay, open_requests, load_observations, the gate, the CLI).
tests/test_hooks_meta.py fails when a hook has no test here."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import click
import pytest
from conftest import FIXTURES, POLICIES

from tickgate import hookimpl
from tickgate.kv.paged import PagedAllocator
from tickgate.seed.scheduler import SeedScheduler
from tickgate.commands.cli import main
from tickgate.interfaces.gate import GateSignal, SignalResult
from tickgate.interfaces import AdmissionPolicy, BackendMirror, EvidenceParser, TimingModel, WorkloadReader
from tickgate.interfaces.model import Request
from tickgate.host.registry import get_registry
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests


def install(**hooks: Any) -> None:
    """Register a module holding these hook implementations in the process registry."""
    module = types.ModuleType("inproc_plugin")
    for name, function in hooks.items():
        setattr(module, name, hookimpl(function))
    get_registry().register_module(module, distribution="inproc-dist", version="1.0")


def policy_with(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text((POLICIES / "default.yaml").read_text().replace(old, new))
    return path


def run(policy: Path) -> dict[str, Any]:
    requests, inputs = open_requests(FIXTURES / "workload.json")
    return replay(requests, load_policy(policy), inputs=inputs)


def test_register_schedulers(tmp_path: Path) -> None:
    class Renamed(SeedScheduler):
        name = "seed-copy"
        description = "The seed scheduler under another name."

    install(register_schedulers=lambda register: register(Renamed))
    report = run(policy_with(tmp_path, "name: seed", "name: seed-copy"))
    assert report["plugins"]["scheduler"]["name"] == "seed-copy"
    assert report["summary"] == run(POLICIES / "default.yaml")["summary"]  # same decisions, same fingerprint


def test_register_kv_allocators(tmp_path: Path) -> None:
    reserved: list[int] = []

    class Counting(PagedAllocator):
        name = "counting-paged"
        description = "Paged KV that records reservations."

        def reserve(self, owner: str, pages: int) -> None:
            reserved.append(pages)
            super().reserve(owner, pages)

    install(register_kv_allocators=lambda register: register(Counting))
    report = run(policy_with(tmp_path, "name: paged", "name: counting-paged"))
    assert sum(reserved) == report["summary"]["total_reserved_kv_pages"] == 18


def test_register_admission_policies(tmp_path: Path) -> None:
    class Lifo(AdmissionPolicy):
        name = "lifo"
        description = "Newest request first."

        def __init__(self) -> None:
            self.queue: list[Request] = []

        @classmethod
        def build(cls, options: Any, ctx: Any) -> "Lifo":
            return cls()

        def enqueue(self, request: Request, tick: int) -> None:
            self.queue.append(request)

        def candidates(self, tick: int) -> Any:
            yield from list(reversed(self.queue))

        def admitted(self, request: Request, tick: int) -> None:
            self.queue.remove(request)

        def __len__(self) -> int:
            return len(self.queue)

    install(register_admission_policies=lambda register: register(Lifo))
    report = run(policy_with(tmp_path, "name: priority-fcfs", "name: lifo"))
    assert report["plugins"]["admission"]["name"] == "lifo"
    assert report["summary"]["completed_requests"] == 4
    assert report["summary"]["trace_fingerprint"] != run(POLICIES / "default.yaml")["summary"]["trace_fingerprint"]


def test_register_timing_models(tmp_path: Path) -> None:
    class PerToken(TimingModel):
        name = "per-token"
        description = "ms per step, per token scheduled and per sequence decoded"
        options_schema = {"type": "object", "additionalProperties": False, "required": ["ms"],
                          "properties": {"ms": {"type": "number", "minimum": 0}}}

        def step_ms(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
            return self.options["ms"] * (1 + prefill_tokens + decode_seqs)

    install(register_timing_models=lambda register: register(PerToken))
    timing = "timing: {name: per-token, options: {ms: 0.5}}\n"
    report = run(policy_with(tmp_path, "version: 1\n", "version: 1\n" + timing))
    assert report["inputs"]["timing"] == {"name": "per-token", "options": {"ms": 0.5}}
    untimed = run(POLICIES / "default.yaml")
    assert report["summary"]["completed_requests"] == untimed["summary"]["completed_requests"] == 4
    # every step costs 0.5 ms and 0.5 more per token it schedules or decodes
    steps = report["summary"]["total_ticks"]
    tokens = report["summary"]["total_prompt_tokens"] + report["summary"]["total_decode_tokens"]
    assert report["latency"]["busy_ms"] == 0.5 * (steps + tokens)


def test_register_routers(tmp_path: Path) -> None:
    from tickgate import Router

    seen: list[int] = []

    class LastReplica(Router):
        name = "last-replica"
        description = "every request to the last replica of the pool"

        @classmethod
        def build(cls, options: Any, ctx: Any) -> "LastReplica":
            seen.append(ctx.replicas)
            return cls()

        def route(self, request: Request, replicas: Any) -> int:
            return len(replicas) - 1

    install(register_routers=lambda register: register(LastReplica))
    workload = tmp_path / "w.json"
    doc = json.loads((FIXTURES / "workload.json").read_text())
    for r in doc["requests"]:
        r["arrival_ms"] = 5.0 * r.pop("arrival_tick")
    workload.write_text(json.dumps(doc))
    timing = "timing: {fixed_ms: 5.0, per_decode_seq_ms: 0.5}\ncluster: {replicas: 3, router: {name: last-replica}}\n"
    requests, inputs = open_requests(workload)
    report = replay(requests, load_policy(policy_with(tmp_path, "version: 1\n", "version: 1\n" + timing)),
                    inputs=inputs)
    assert seen == [3]
    assert report["fleet"]["routing"]["decisions"] == {"replica-0": 0, "replica-1": 0, "replica-2": 4}
    assert report["summary"]["completed_requests"] == 4


def test_register_autoscalers(tmp_path: Path) -> None:
    from tickgate import Autoscaler, ScaleDecision

    built: list[tuple[str, int, int]] = []

    class OneMore(Autoscaler):
        name = "one-more"
        description = "one replica more at every decision while requests wait"

        @classmethod
        def build(cls, options: Any, ctx: Any) -> "OneMore":
            built.append((ctx.pool, ctx.min_replicas, ctx.max_replicas))
            return cls()

        def decide(self, signals: Any) -> ScaleDecision:
            grow = signals.waiting > 0
            return ScaleDecision(signals.current + grow, "requests wait" if grow else "none waits", "waiting",
                                 float(signals.waiting))

    install(register_autoscalers=lambda register: register(OneMore))
    workload = tmp_path / "w.json"
    doc = {"version": 1, "requests": [
        {"id": f"r{i}", "prompt_tokens": 64, "max_output_tokens": 40, "arrival_ms": 2.0 * i} for i in range(40)]}
    workload.write_text(json.dumps(doc))
    timing = ("timing: {fixed_ms: 5.0, per_decode_seq_ms: 0.5}\n"
              "cluster: {replicas: 1, autoscaler: {name: one-more, interval_s: 0.02, max_replicas: 3}}\n")
    requests, inputs = open_requests(workload)
    report = replay(requests, load_policy(policy_with(tmp_path, "version: 1\n", "version: 1\n" + timing)),
                    inputs=inputs)
    assert built == [("default", 1, 3)]
    scaled = report["autoscaling"]
    assert scaled["name"] == "one-more" and scaled["peak_replicas"] == {"default": 3}
    assert [e["action"] for e in scaled["events"]][:2] == ["start", "ready"]
    assert report["summary"]["completed_requests"] == 40


TOY_DOC = {"version": 1, "kind": "tickgate.observations", "run": {"backend": "toy"},
           "requests": [{"request_id": "a", "latency_ms": 10.0}, {"request_id": "b", "latency_ms": 12.5}]}


class ToyMirror(BackendMirror):
    name = "toy-obs"
    description = "toy format: '#toy-obs' then nothing"

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.startswith(b"#toy-obs")

    def read(self, path: Path) -> dict[str, Any]:
        return json.loads(json.dumps(TOY_DOC))


def test_register_backend_mirrors(tmp_path: Path) -> None:
    from tickgate.gate.inputs import load_observations

    install(register_backend_mirrors=lambda register: register(ToyMirror))
    path = tmp_path / "run.toy"
    path.write_text("#toy-obs\n")
    doc = load_observations(path)  # auto-detected by sniff
    assert doc["requests"] == TOY_DOC["requests"]
    assert doc["run"]["provenance"]["format"] == "toy-obs"
    assert doc["run"]["provenance"]["distribution"] == "inproc-dist"


def test_register_evidence_parsers(tmp_path: Path) -> None:
    from tickgate.gate.inputs import load_observations

    class TokenLog(EvidenceParser):
        name = "token-log"
        description = "request id and receive time per token"

        def sniff(self, path: Path, head: bytes) -> bool:
            return head.startswith(b"#token-log")

        def parse(self, path: Path) -> list[dict[str, Any]]:
            times: dict[str, list[float]] = {}
            for line in path.read_text().splitlines()[1:]:
                rid, ms = line.split()
                times.setdefault(rid, []).append(float(ms))
            return [{"request_id": rid, "streaming": {
                "complete": True, "timestamps": "receive", "first_token_ms": t[0],
                "gaps_ms": [b - a for a, b in zip(t, t[1:])], "token_count": len(t)}}
                for rid, t in sorted(times.items())]

    install(register_evidence_parsers=lambda register: register(TokenLog))
    info = get_registry().get("evidence_parser", "token-log")
    assert info.distribution == "inproc-dist"
    capture = tmp_path / "tokens.log"
    capture.write_text("#token-log\na 10\nb 12\na 15\n")
    # the real path: normalize --evidence picks the parser by sniffing and joins by request id
    from tickgate.readers.evidence import attach_evidence

    neutral = tmp_path / "obs.json"
    neutral.write_text(json.dumps({"version": 1, "kind": "tickgate.observations", "run": {},
                                   "requests": [{"request_id": "a"}, {"request_id": "b"}]}))
    doc = attach_evidence(load_observations(neutral), [capture])
    assert doc["requests"][0]["streaming"]["gaps_ms"] == [5.0]
    assert doc["requests"][1]["streaming"]["first_token_ms"] == 12.0
    # the evidence is what the neutral schema's `streaming` object holds
    neutral.write_text(json.dumps(doc))
    assert load_observations(neutral)["requests"] == doc["requests"]


def test_register_gate_signals(tmp_path: Path) -> None:
    from tickgate.gate.pipeline import gate_files

    class MinPairs(GateSignal):
        name = "min-pairs"
        description = "hold unless enough requests were matched"
        options_schema = {"type": "object", "additionalProperties": False,
                          "properties": {"min": {"type": "integer", "minimum": 1}}}

        def evaluate(self, comparison: Any) -> SignalResult:
            need = self.options["min"]
            if comparison.matched >= need:
                return SignalResult(status="pass", reason="within_policy", message=f"{comparison.matched} pairs")
            return SignalResult(status="hold", reason="insufficient_data", message=f"{comparison.matched} < {need}",
                                next_action="send more traffic")

    install(register_gate_signals=lambda register: register(MinPairs))
    obs = tmp_path / "obs.json"
    obs.write_text(json.dumps(TOY_DOC))
    decisions = {}
    for need in (2, 3):
        policy = tmp_path / f"gate{need}.yaml"
        policy.write_text(f"version: 1\ngate:\n  signals:\n    - name: min-pairs\n      options: {{min: {need}}}\n")
        decisions[need] = gate_files(policy, baseline=obs, candidate=obs)["decision"]
    assert decisions == {2: "promote", 3: "hold"}


def test_register_workload_readers(tmp_path: Path) -> None:
    class TsvReader(WorkloadReader):
        name = "tsv"
        description = "id, prompt, output, arrival tick; tab-separated"

        def read(self, path: Path, options: Any) -> Any:
            for line in path.read_text().splitlines():
                rid, prompt, out, tick = line.split("\t")
                yield Request(id=rid, prompt_tokens=int(prompt), max_output_tokens=int(out), arrival_tick=int(tick))

    install(register_workload_readers=lambda register: register(TsvReader))
    trace = tmp_path / "trace.tsv"
    trace.write_text("a\t32\t4\t0\nb\t64\t2\t1\n")
    requests, inputs = open_requests(trace, "tsv")
    report = replay(requests, load_policy(None), inputs=inputs)
    assert inputs["format"] == "tsv"
    assert report["summary"]["request_count"] == report["summary"]["completed_requests"] == 2
    assert report["summary"]["total_prompt_tokens"] == 96


def test_register_commands(capsys: pytest.CaptureFixture[str]) -> None:
    @click.command("hello")
    @click.argument("who")
    def hello(who: str) -> None:
        """Say hello."""
        click.echo(f"hello {who}")

    install(register_commands=lambda register: register(hello))
    assert main(["hello", "tickgate"]) == 0
    assert capsys.readouterr().out == "hello tickgate\n"
    assert main(["--help"]) == 0
    assert "hello" in capsys.readouterr().out


def test_register_conformance_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tickgate import ConformanceSpec, conformance_command

    def mirror(requests: list[Request], config: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"step": i, "tokens": r.prompt_tokens * config["scale"]} for i, r in enumerate(requests)]

    spec = ConformanceSpec(engine="toy", label="Toy", defaults={"scale": 1}, fields=("tokens",),
                           norm=lambda line: {"tokens": line["tokens"]}, run_mirror=mirror)
    install(register_conformance_checks=lambda register: register(
        conformance_command(spec, harness="toy-reference", driver="drive_toy.py")))
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"requests": [{"id": "a", "prompt_len": 3, "max_output_len": 1},
                                                 {"id": "b", "prompt_len": 5, "max_output_len": 1}]}))
    steps = tmp_path / "s.jsonl"
    steps.write_text('{"step": 0, "tokens": 3}\n{"step": 1, "tokens": 5}\n')
    args = ["conformance", "toy", "--workload", str(workload), "--reference", str(steps)]
    assert main([*args, "--output", str(tmp_path / "r.json")]) == 0
    assert "toy conformance: 2/2 steps identical" in capsys.readouterr().out
    config = tmp_path / "c.json"
    config.write_text('{"scale": 2}')
    assert main([*args, "--output", str(tmp_path / "r2.json"), "--config", str(config)]) == 1
    report = json.loads((tmp_path / "r2.json").read_text())
    assert (report["first_divergent_step"], report["first_divergence"]["field"]) == (0, "tokens")
    assert "step 0: tokens differs: Toy 3 vs mirror 6" in capsys.readouterr().err
