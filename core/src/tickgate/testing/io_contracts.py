"""Contract tests for plugins that read files (backend mirrors, workload
readers) and for gate signals. Inputs are foreign data: whatever the bytes,
a reader returns valid data or raises a :class:`~tickgate.util.errors.TickgateError`,
never another exception."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from ..interfaces import optional_attribute
from ..util.errors import InputError, TickgateError
from ..util.schemas import data_file, load_schema, validate
from .contracts import PluginContract
from .support import across_hash_seeds, canonical, clean_failure, fresh_registry, garbage_files, write_json

#: why a run gated against itself may hold: never a regression
SELF_GATE_HOLD_REASONS = frozenset({"insufficient_data", "missing_evidence", "inconclusive"})


class _FileReaderContract(PluginContract):
    sample: ClassVar[Path | None] = None

    def sample_path(self, tmp_path: Path) -> Path:
        """The sample input; override to build one in ``tmp_path``."""
        if self.sample is None:
            raise AssertionError(f"{type(self).__name__} must set sample (a file the plugin reads)")
        return Path(self.sample)

    def read(self, path: Path) -> Any:
        raise NotImplementedError

    def check_output(self, output: Any, path: Path) -> None:
        raise NotImplementedError

    def test_missing_file_is_an_input_error(self, tmp_path: Path) -> None:
        missing = tmp_path / "does-not-exist.dat"
        with pytest.raises(TickgateError) as caught:
            self.read(missing)
        assert str(missing) in str(caught.value)

    def test_bad_input_is_valid_output_or_a_clean_error(self, tmp_path: Path) -> None:
        for path in garbage_files(tmp_path / "garbage", self.sample_path(tmp_path)):
            output, error = clean_failure(self.read, path)
            if error is None:
                self.check_output(output, path)
            else:
                assert str(error).strip() and "\n" not in str(error), f"{path.name}: not one line: {error}"


class BackendMirrorContract(_FileReaderContract):
    """Set ``plugin_name`` and ``sample`` (a native file the mirror reads)."""

    kind = "backend_mirror"
    gate_policy: ClassVar[Path | None] = None

    def read(self, path: Path) -> Any:
        return self.info().obj().read(path)

    def check_output(self, output: Any, path: Path) -> None:
        assert isinstance(output, dict), f"read returned {type(output).__name__}, not a document"
        validate(output, load_schema("observations.schema.json"), file=path)
        provenance = output["run"].get("provenance") or {}
        assert provenance.get("format") == self.plugin_name, "provenance.format must name the mirror"

    def test_unrelated_documents_are_not_this_format(self, tmp_path: Path) -> None:
        """``--format NAME`` skips ``sniff``: ``read`` itself must refuse a file
        with none of the format's defining fields, never return an empty run."""
        cases = {
            "object.json": '{"hello": "world"}\n',
            "empty-object.json": "{}\n",
            "lines.jsonl": '{"hello": 1}\n{"hello": 2}\n',
            "text.txt": "hello world\n",
        }
        for name, text in cases.items():
            path = tmp_path / name
            path.write_text(text)
            with pytest.raises(InputError):
                self.read(path)

    def test_sniff_claims_the_sample(self, tmp_path: Path) -> None:
        from ..gate.detect import detect_format
        from ..readers.common import read_head

        sample = self.sample_path(tmp_path)
        assert self.info().obj().sniff(sample, read_head(sample)) is True
        assert detect_format(sample).name == self.plugin_name

    def test_output_validates_against_the_neutral_schema(self, tmp_path: Path) -> None:
        sample = self.sample_path(tmp_path)
        doc = self.read(sample)
        self.check_output(doc, sample)
        assert doc["run"]["provenance"].get("file") in (str(sample), sample.name, str(sample.resolve()))

    def test_round_trip_through_the_neutral_schema(self, tmp_path: Path) -> None:
        from ..gate.inputs import load_observations

        doc = load_observations(self.sample_path(tmp_path), self.plugin_name)
        neutral = write_json(tmp_path / "neutral.json", doc)
        assert load_observations(neutral) == json.loads(canonical(doc))

    def test_read_is_deterministic(self, tmp_path: Path) -> None:
        sample = self.sample_path(tmp_path)
        first = canonical(self.read(sample))
        assert canonical(self.read(sample)) == first
        from ..gate.inputs import load_observations

        expected = canonical(load_observations(sample, self.plugin_name))
        for out in across_hash_seeds("mirror", self.plugin_name, str(sample)):
            assert out.strip() == expected

    def test_gated_against_itself_never_regresses(self, tmp_path: Path) -> None:
        """The same run as baseline and candidate: never a rollback, and a hold
        only for lack of evidence (docs/gate.md), through the real CLI."""
        from ..commands.cli import main

        sample = self.sample_path(tmp_path)
        policy = self.gate_policy or data_file("policies", "gate-default.yaml")
        out = tmp_path / "self-gate.json"
        fresh_registry()
        code = main(
            [
                "gate",
                "--baseline",
                str(sample),
                "--candidate",
                str(sample),
                "--policy",
                str(policy),
                "--output",
                str(out),
                "--format",
                self.plugin_name,
                "--quiet",
            ]
        )
        report = json.loads(out.read_text())
        assert code == report["exit_code"] and report["decision"] in ("promote", "hold")
        for signal in report["signals"]:
            if signal["status"] == "hold":
                assert signal["reason"] in SELF_GATE_HOLD_REASONS, signal
            assert signal["status"] != "rollback", signal


class WorkloadReaderContract(_FileReaderContract):
    """Set ``plugin_name`` and ``sample`` (a trace file the reader streams)."""

    kind = "workload_reader"

    def read(self, path: Path) -> Any:
        from ..workload.sources import open_requests

        fresh_registry()
        stream, _ = open_requests(path, self.plugin_name)
        return list(stream)

    def check_output(self, output: Any, path: Path) -> None:
        from ..interfaces.model import Request

        assert all(isinstance(r, Request) for r in output)
        ids = [r.id for r in output]
        assert len(set(ids)) == len(ids), "request ids must be unique"
        keys = [r.arrival_ms if r.arrival_ms is not None else float(r.arrival_tick) for r in output]
        assert keys == sorted(keys), "requests must come in arrival order"

    def test_sample_reads_in_arrival_order(self, tmp_path: Path) -> None:
        requests = self.read(self.sample_path(tmp_path))
        assert requests, "the sample gave no requests"
        self.check_output(requests, self.sample_path(tmp_path))

    def test_requests_round_trip_through_the_workload_schema(self, tmp_path: Path) -> None:
        from ..workload.sources import open_requests

        requests = self.read(self.sample_path(tmp_path))
        rows = [
            {
                k: (list(v) if isinstance(v, tuple) else v)
                for k, v in attrs.asdict(r).items()
                if v is not None and v is not False
            }
            for r in requests
        ]
        doc = {"version": 1, "requests": rows}
        validate(doc, load_schema("workload.schema.json"), file="<reader output>")
        stream, _ = open_requests(write_json(tmp_path / "workload.json", doc))
        assert list(stream) == requests

    def test_read_is_deterministic(self, tmp_path: Path) -> None:
        sample = self.sample_path(tmp_path)
        expected = canonical([attrs.asdict(r) for r in self.read(sample)])
        for out in across_hash_seeds("reader", self.plugin_name, str(sample)):
            assert out.strip() == expected

    def test_reading_in_parts_gives_what_read_gives(self, tmp_path: Path) -> None:
        """A reader that declares ``reads_parts`` (``tickgate import`` may split a
        large file between two processes): the two halves of the sample, joined,
        are the requests and the ``source`` of one ``read``."""
        from ..host.registry import get_registry
        from ..importers.import_parts import split

        cls = get_registry().get(self.kind, self.plugin_name).obj
        if not optional_attribute(cls, "reads_parts"):
            pytest.skip("the reader reads whole files only")
        sample = self.sample_path(tmp_path)
        parts = split(sample)
        assert parts is not None, "the sample must have a line break past its middle to be cut"
        whole = cls()
        expected = list(whole.read(sample, {}))
        first, second = cls(), cls()
        requests = list(first.read_part(sample, {}, parts[0]))
        state = first.part_state()
        requests += second.read_part(sample, {}, parts[1])
        first.join_parts(sample, state, second.part_state(), False)
        assert requests == expected
        assert optional_attribute(first, "source") == optional_attribute(whole, "source")


def synthetic_run(label: str, ids: list[str], seed: int = 7) -> dict[str, Any]:
    """A neutral observations document with every per-request field a signal
    may need (seeded: the same arguments give the same document)."""
    rng = random.Random(seed)
    requests = []
    for rid in ids:
        gaps = [round(rng.uniform(5, 15), 3) for _ in range(4)]
        requests.append(
            {
                "request_id": rid,
                "route": "/v1/chat/completions",
                "output_fingerprint": f"sha256:{rid}",
                "output_values": [1.0, 2.5],
                "latency_ms": round(rng.uniform(80, 120), 3),
                "ttft_ms": round(rng.uniform(10, 30), 3),
                "itl_ms": gaps,
                "tokens_in": 32,
                "tokens_out": 5,
                "memory_pressure": round(rng.uniform(0.3, 0.6), 4),
                "streaming": {
                    "complete": True,
                    "timestamps": "receive",
                    "first_token_ms": 20.0,
                    "gaps_ms": gaps,
                    "token_count": 5,
                    "chunk_count": 5,
                    "finish_reason": "stop",
                },
            }
        )
    return {
        "version": 1,
        "kind": "tickgate.observations",
        "run": {
            "label": label,
            "backend": "contract",
            "model": "m",
            "accelerator": "cpu",
            "scheduler": "seed",
            "provenance": {"format": "neutral"},
        },
        "requests": requests,
    }


class GateSignalContract(PluginContract):
    """Set ``plugin_name`` and ``options`` (valid options for the signal)."""

    kind = "gate_signal"
    options: ClassVar[Mapping[str, Any]] = {}
    pairs: ClassVar[int] = 400

    def gate_policy(self, tmp_path: Path, options: Any = None) -> Path:
        entry = {"name": self.plugin_name, "options": dict(self.options) if options is None else options}
        return write_json(
            tmp_path / "gate-policy.yaml", {"version": 1, "gate": {"seed": 11, "signals": [entry]}}
        )

    def gate(self, tmp_path: Path, baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
        from ..gate.pipeline import gate_files

        fresh_registry()
        return gate_files(
            self.gate_policy(tmp_path),
            baseline=write_json(tmp_path / "b.json", baseline),
            candidate=write_json(tmp_path / "c.json", candidate),
        )

    def ids(self, prefix: str = "q") -> list[str]:
        return [f"{prefix}{i:05d}" for i in range(self.pairs)]

    def test_bad_options_are_located_errors(self, tmp_path: Path) -> None:
        from ..gate.config import load_gate_config
        from ..host.policy import load_policy

        for bad in self.bad_options:
            path = self.gate_policy(tmp_path, bad)
            fresh_registry()
            with pytest.raises(InputError) as caught:
                load_gate_config(load_policy(path))
            assert caught.value.line is not None
            assert (caught.value.json_path or "").startswith("$.gate.signals[0].options"), caught.value

    def test_identical_runs_never_regress(self, tmp_path: Path) -> None:
        run = synthetic_run("same", self.ids())
        (signal,) = self.gate(tmp_path, run, run)["signals"]
        assert signal["status"] != "rollback", signal
        if signal["status"] == "hold":
            assert signal["reason"] in SELF_GATE_HOLD_REASONS, signal

    def test_no_matched_traffic_never_passes(self, tmp_path: Path) -> None:
        """Fail closed: with no request joined there is no evidence for a pass."""
        report = self.gate(tmp_path, synthetic_run("b", self.ids("b")), synthetic_run("c", self.ids("c")))
        (signal,) = report["signals"]
        assert report["join"]["matched"] == 0 and signal["status"] != "pass", signal

    def test_evaluation_is_deterministic(self, tmp_path: Path) -> None:
        base = synthetic_run("b", self.ids(), seed=1)
        cand = synthetic_run("c", self.ids(), seed=2)
        first = self.gate(tmp_path, base, cand)
        assert canonical(self.gate(tmp_path, base, cand)) == canonical(first)
        args = (str(tmp_path / "gate-policy.yaml"), str(tmp_path / "b.json"), str(tmp_path / "c.json"))
        for out in across_hash_seeds("gate", *args):
            assert out.strip() == canonical(first)
