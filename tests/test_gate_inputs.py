"""Reading gate inputs: the hand-written request check agrees with the JSON
Schema, errors are located, backend mirrors are chosen by sniffing (exactly
one), and a misbehaving mirror is an error naming its distribution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES

from tickgate.util.errors import InputError, PluginError
from tickgate.gate.batch_columns import add_batch
from tickgate.gate.inputs import load_observations, read_bundle, read_side
from tickgate.gate.observations import Side, side_from_document
from tickgate.host.hookspecs import hookimpl
from tickgate.host.registry import Registry

VALID = {"request_id": "a", "backend": "vllm", "model": "m", "accelerator": "h100", "route": "/v1/completions",
         "scheduler": "vllm-v1", "output_fingerprint": "ff", "error": None, "latency_ms": 12.5, "ttft_ms": 3,
         "itl_p95_ms": 1.0, "tokens_in": 10, "tokens_out": 4, "memory_pressure": 0.5}

INVALID: list[tuple[str, dict[str, Any]]] = [
    ("latency_ms", {"latency_ms": -1}),
    ("latency_ms", {"latency_ms": "12"}),
    ("latency_ms", {"latency_ms": True}),
    ("latency_ms", {"latency_ms": None}),
    ("tokens_out", {"tokens_out": 1.5}),
    ("memory_pressure", {"memory_pressure": 1.2}),
    ("request_id", {"request_id": ""}),
    ("request_id", {"request_id": 7}),
    ("model", {"model": None}),
    ("error", {"error": 500}),
    ("output_values", {"output_values": [1, "x"]}),
    ("itl_ms[1]", {"itl_ms": [1, -2]}),
    ("streaming.complete", {"streaming": {"gaps_ms": [1.0]}}),
    ("streaming", {"streaming": {"complete": True, "gap": 1}}),
    ("segments.region", {"segments": {"region": 3}}),
    ("", {"latency": 3}),
]


def _schema_errors(request: dict[str, Any]) -> list[str]:
    import jsonschema

    from tickgate.util.schemas import load_schema

    schema = load_schema("observations.schema.json")
    doc = {"version": 1, "kind": "tickgate.observations", "run": {}, "requests": [request]}
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


def _fail(sub: str, msg: str) -> InputError:
    return InputError("f.json", msg, json_path=f"$.requests[0].{sub}")


def test_valid_request_passes_both_checks():
    assert _schema_errors(VALID) == []
    side = Side("b", "f.json")
    side.add(dict(VALID), _fail)
    assert side.num["latency_ms"][0] == 12.5 and side.cats["model"].value(0) == "m"


@pytest.mark.parametrize("field,change", INVALID, ids=[json.dumps(c) for _, c in INVALID])
def test_hand_check_rejects_exactly_what_the_schema_rejects(field, change):
    request = {**VALID, **change}
    assert _schema_errors(request), "the schema must reject this too"
    with pytest.raises(InputError) as err:
        Side("b", "f.json").add(request, _fail)
    assert err.value.json_path.endswith(field)
    assert not add_batch(Side("b", "f.json"), [dict(VALID, request_id="z"), request])


def test_fast_path_builds_the_same_columns_as_the_exact_path():
    bundle = json.loads((FIXTURES / "release_gate_bad.json").read_text())
    requests = bundle["candidate"]["requests"]
    fast, slow = Side("c", "x"), Side("c", "x")
    assert add_batch(fast, requests)
    for r in requests:
        slow.add(r, _fail)
    for attr in ("ids", "index", "fingerprints", "values", "errors", "error_messages", "streaming"):
        assert getattr(fast, attr) == getattr(slow, attr), attr
    for key in fast.num:
        assert fast.num[key].tobytes() == slow.num[key].tobytes(), key
    for key in fast.cats:
        assert fast.cats[key].codes == slow.cats[key].codes and fast.cats[key].values == slow.cats[key].values


def test_explicit_null_value_is_refused_by_the_fast_path():
    assert not add_batch(Side("c", "x"), [dict(VALID, ttft_ms=None)])
    assert add_batch(Side("c", "x"), [dict(VALID, error=None)])


def test_bad_request_in_a_bundle_is_located_by_line_column_and_path(tmp_path):
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    bundle["candidate"]["requests"][7]["tokens_out"] = -3
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle, indent=1))
    with pytest.raises(InputError) as err:
        read_bundle(path)
    text = path.read_text()
    line = text[:text.index('"req-00007"', text.index('"candidate"'))].count("\n") + 1
    assert err.value.json_path == "$.candidate.requests[7].tokens_out"
    assert err.value.line is not None and abs(err.value.line - line) <= 2
    assert "-3" in err.value.message


def test_duplicate_request_id_is_an_error(tmp_path):
    doc = {"version": 1, "kind": "tickgate.observations", "run": {},
           "requests": [dict(VALID), dict(VALID, latency_ms=3.0)]}
    path = tmp_path / "o.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"duplicate request_id 'a'") as err:
        read_side(path, "baseline", registry=Registry())
    assert err.value.json_path == "$.requests[1].request_id"


@pytest.mark.parametrize("text,where", [
    ('{"version": 1, "kind": "tickgate.observations", "run": {}, "requests": [{"request_id": "a",}]}', "$.requests[0]"),
    ('{"version": 1, "kind": "tickgate.observations", "run": {}, "requests": [{"request_id": "a"} {"x": 1}]}',
     "$.requests"),
    ('{"version": 1, "kind": "tickgate.observations", "run": {"label": 3}}', "$.run.label"),
    ('{"version": 1, "kind": "tickgate.observations", "run": {}, "requests": [{"request_id": "a", "latency_ms": NaN}]}',
     "$.requests[0].latency_ms"),
    ('{"version": 2, "kind": "tickgate.observations", "run": {}}', "$.version"),
])
def test_malformed_neutral_files_are_input_errors(tmp_path, text, where):
    path = tmp_path / "o.json"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_side(path, "baseline", registry=Registry())
    assert err.value.json_path == where and err.value.line == 1


# -- backend mirrors ------------------------------------------------------------------

class CsvMirror:
    """A toy engine format: ``id,latency_ms,output`` lines after a '#toybench' header."""

    name = "toybench"
    description = "test mirror"

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.startswith(b"#toybench")

    def read(self, path: Path) -> dict[str, Any]:
        requests = []
        for line in path.read_text().splitlines()[1:]:
            rid, latency, output = line.split(",")
            requests.append({"request_id": rid, "latency_ms": float(latency), "output_fingerprint": output,
                             "model": "toy", "accelerator": "cpu", "ttft_ms": 1.0, "itl_p95_ms": 1.0,
                             "memory_pressure": 0.4})
        return {"version": 1, "kind": "tickgate.observations",
                "run": {"backend": "toy", "provenance": {"format": self.name, "file": path.name}},
                "requests": requests}


class GreedyMirror(CsvMirror):
    name = "greedy"

    def sniff(self, path: Path, head: bytes) -> bool:
        return True


class BrokenMirror(CsvMirror):
    name = "broken"

    def read(self, path: Path) -> dict[str, Any]:
        raise KeyError("ttfts")


class InvalidMirror(CsvMirror):
    name = "invalid"

    def read(self, path: Path) -> dict[str, Any]:
        doc = super().read(path)
        doc["requests"][1]["latency_ms"] = -5
        return doc


def registry_with(*mirrors: Any) -> Registry:
    class Module:
        @staticmethod
        @hookimpl
        def register_backend_mirrors(register):
            for m in mirrors:
                register(m)

    reg = Registry()
    reg.register_module(Module, distribution="toy-dist", version="1.2")
    from tickgate.gate.signals import builtin_signals as plugin
    from tickgate.readers import builtin_mirrors as readers

    reg.register_module(plugin, distribution="tickgate", version="0")
    reg.register_module(readers, distribution="tickgate", version="0")
    return reg


def _toy(path: Path, rows: list[tuple[str, float, str]]) -> Path:
    path.write_text("#toybench\n" + "".join(f"{r},{lat},{out}\n" for r, lat, out in rows))
    return path


def test_engine_native_files_go_through_the_one_mirror_that_claims_them(tmp_path):
    reg = registry_with(CsvMirror)
    rows = [(f"q{i}", 100.0 + i % 13, f"o{i}") for i in range(300)]
    base = _toy(tmp_path / "base.toy", rows)
    cand = _toy(tmp_path / "cand.toy", [(r, lat, "changed" if r == "q7" else o) for r, lat, o in rows])
    doc = load_observations(base, registry=reg)
    assert doc["run"]["provenance"]["format"] == "toybench" and len(doc["requests"]) == 300
    from tickgate.gate.pipeline import gate_files

    report = gate_files(POLICIES / "gate-default.yaml", baseline=base, candidate=cand, registry=reg)
    assert report["decision"] == "rollback"
    assert report["inputs"]["candidate"]["format"] == "toybench"
    assert "q7" in next(t for t in report["triage"] if t["signal"] == "output-mismatch")["next_action"]


def test_neutral_documents_are_used_directly_without_asking_mirrors(tmp_path):
    path = tmp_path / "n.json"
    path.write_text(json.dumps({"version": 1, "kind": "tickgate.observations", "run": {}, "requests": [VALID]}))
    assert load_observations(path, registry=registry_with(GreedyMirror))["requests"] == [VALID]


def test_no_mirror_or_several_mirrors_is_an_error_listing_formats(tmp_path):
    path = _toy(tmp_path / "x.toy", [("a", 1.0, "x")])
    with pytest.raises(InputError, match=r"matches no known format; known formats: aiperf, genai-perf, neutral, "
                                         r"tickgate-replay \(force one with --format NAME\)"):
        load_observations(path, registry=registry_with())
    with pytest.raises(InputError, match=r"matches several formats \(greedy, toybench\)"):
        load_observations(path, registry=registry_with(CsvMirror, GreedyMirror))
    assert load_observations(path, "toybench", registry=registry_with(CsvMirror, GreedyMirror))["run"]["backend"] == "toy"
    with pytest.raises(InputError, match='unknown format "nope"'):
        load_observations(path, "nope", registry=registry_with(CsvMirror))


def test_a_failing_mirror_is_an_error_naming_its_distribution(tmp_path):
    path = _toy(tmp_path / "x.toy", [("a", 1.0, "x"), ("b", 2.0, "y")])
    with pytest.raises(PluginError, match=r'backend mirror "broken" from toy-dist 1.2 failed to read .*KeyError'):
        read_side(path, "baseline", registry=registry_with(BrokenMirror))
    with pytest.raises(PluginError, match=r'"invalid" from toy-dist 1.2 returned an invalid observations '
                                          r"document .*\$\.requests\[1\]\.latency_ms"):
        read_side(path, "baseline", registry=registry_with(InvalidMirror))


def test_side_from_document_applies_run_level_defaults():
    side = side_from_document({"version": 1, "kind": "tickgate.observations",
                               "run": {"backend": "sglang", "model": "m1"},
                               "requests": [{"request_id": "a"}, {"request_id": "b", "backend": "vllm"}]}, "b", "x")
    assert [side.cats["backend"].value(i) for i in range(2)] == ["sglang", "vllm"]
    assert [side.cats["model"].value(i) for i in range(2)] == ["m1", "m1"]
    assert side.cats["route"].value(0) is None


# -- parallel reading of big sides ---------------------------------------------------------------

def _split_bundle(tmp_path: Path, name: str) -> tuple[Path, Path]:
    bundle = json.loads((FIXTURES / name).read_text())
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    base.write_text(json.dumps(bundle["baseline"]))
    cand.write_text(json.dumps(bundle["candidate"]))
    return base, cand


def test_parallel_read_gives_the_same_sides_as_reading_in_turn(tmp_path, monkeypatch):
    from tickgate.gate.sides import read_pair

    monkeypatch.setenv("TICKGATE_PLUGINS", "tickgate")
    base, cand = _split_bundle(tmp_path, "release_gate_bad.json")
    pb, pc = read_pair(base, cand, "auto")
    for got, path, label in ((pb, base, "baseline"), (pc, cand, "candidate")):
        want = read_side(path, label)
        assert got.ids == want.ids and got.index == want.index and got.run == want.run
        assert got.error_messages == want.error_messages and got.fingerprints == want.fingerprints
        assert all(got.num[k].tobytes() == want.num[k].tobytes() for k in want.num)


def test_parallel_read_reraises_the_childs_located_error(tmp_path, monkeypatch):
    from tickgate.gate.sides import read_pair

    monkeypatch.setenv("TICKGATE_PLUGINS", "tickgate")
    base, cand = _split_bundle(tmp_path, "release_gate_safe.json")
    base.write_text(base.read_text().replace('"latency_ms": ', '"latency_ms": -', 1))
    with pytest.raises(InputError) as err:
        read_pair(base, cand, "auto")
    assert err.value.path == str(base) and err.value.json_path == "$.requests[0].latency_ms"
    assert err.value.line == 1


# -- decoding runs of requests in one call -------------------------------------------------------

def _obs_file(tmp_path: Path, requests: list[Any]) -> Path:
    path = tmp_path / "o.json"
    body = ",\n".join(json.dumps(r) for r in requests)
    path.write_text('{"version": 1, "kind": "tickgate.observations", "run": {},\n"requests": [\n' + body + "\n]}\n")
    return path


def _columns(side: Side) -> Any:
    return (side.ids, side.fingerprints, side.errors.tobytes(), side.streaming.tobytes(),
            {k: v.tobytes() for k, v in side.num.items()}, {k: list(c.codes) for k, c in side.cats.items()})


@pytest.mark.parametrize("streaming_every", [0, 3])
def test_runs_decode_to_the_same_columns_as_one_by_one(tmp_path, json_windows, streaming_every):
    requests = []
    for i in range(60):
        r = dict(VALID, request_id=f"r{i}", latency_ms=float(i), error=None if i % 7 else "boom")
        if streaming_every and i % streaming_every == 0:
            r["streaming"] = {"complete": True, "gaps_ms": [1.0, 2.0]}
            del r["itl_p95_ms"]
        requests.append(r)
    path = _obs_file(tmp_path, requests)
    json_windows(None)  # no runs: one by one
    one_by_one = read_side(path, "b", registry=Registry())
    json_windows(300)  # a run every couple of requests
    in_runs = read_side(path, "b", registry=Registry())
    assert _columns(in_runs) == _columns(one_by_one)
    assert len(in_runs) == 60 and in_runs.error_messages == one_by_one.error_messages


def test_a_bad_request_inside_a_run_is_still_located(tmp_path, json_windows):
    requests = [dict(VALID, request_id=f"r{i}") for i in range(50)]
    requests[31]["latency_ms"] = -4
    path = _obs_file(tmp_path, requests)
    json_windows(400)
    with pytest.raises(InputError) as err:
        read_side(path, "b", registry=Registry())
    assert err.value.json_path == "$.requests[31].latency_ms"
    assert err.value.line == 2 + 31 + 1
    text = path.read_text().replace('"latency_ms": -4', '"latency_ms": NaN')
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_side(path, "b", registry=Registry())
    assert err.value.json_path == "$.requests[31].latency_ms" and "NaN is not valid JSON" in err.value.message
