"""The gate's speed paths change nothing: decoding requests in runs, cutting
columns from one-shape batches, the id index built on demand, the compact
pickle of a side, the join of sides in the same id order, segment groups from
category codes and quantiles read from a column's tail all give exactly what
the plain, per-request paths give (columns, errors and report bytes)."""

from __future__ import annotations

import json
import pickle
import random
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import POLICIES

from tickgate.util.errors import InputError
from tickgate.gate import tail_quantiles as tails
from tickgate.gate.batch_columns import add_batch
from tickgate.gate.inputs import read_side
from tickgate.gate.comparison import Comparison, join
from tickgate.gate.observations import Side, side_from_document
from tickgate.gate.stats import select_quantile
from tickgate.host.registry import Registry
from tickgate.util.quantile import quantile

BASE = {"request_id": "r", "model": "m", "accelerator": "h100", "route": "/v1/chat/completions",
        "output_fingerprint": "ff", "latency_ms": 12.5, "ttft_ms": 3, "itl_p95_ms": 1.0, "tokens_in": 10,
        "tokens_out": 4, "memory_pressure": 0.5}


def _columns(side: Side) -> Any:
    return (side.ids, side.index, side.fingerprints, side.values, side.errors.tobytes(), side.error_messages,
            side.streaming.tobytes(), {k: v.tobytes() for k, v in side.num.items()},
            {k: (list(c.codes), c.values) for k, c in side.cats.items()}, side.custom_keys)


def _write(tmp_path: Path, requests: list[Any], separator: str = ",\n", name: str = "o.json") -> Path:
    path = tmp_path / name
    body = separator.join(r if isinstance(r, str) else json.dumps(r) for r in requests)
    path.write_text('{"version": 1, "kind": "tickgate.observations", "run": {"backend": "vllm"},\n'
                    '"requests": [\n' + body + "\n]}\n", encoding="utf-8")
    return path


def _exact(path: Path) -> Side:
    """The plain path: the whole document decoded, then one request at a time."""
    return side_from_document(json.loads(path.read_text(encoding="utf-8")), "b", str(path))


def _edge_requests() -> list[Any]:
    """Escapes, unicode, number spellings, nulls, nested values and shape changes."""
    out: list[Any] = []
    for i in range(90):
        r: dict[str, Any] = dict(BASE, request_id=f"r{i:03d}")
        kind = i % 15
        if kind == 1:
            r["output_fingerprint"] = 'quote " backslash \\ newline \n tab \t nul \u0000 é ☃ 😀'
        elif kind == 2:
            r["route"] = "/ünïcödé/路由"
            r["model"] = "\ud83d\ude00"  # a surrogate pair in the file once json.dumps escapes it
        elif kind == 3:
            r["error"] = None
        elif kind == 4:
            r["error"] = "timeout {\"}"
        elif kind == 5:
            r.update(streaming={"complete": True, "gaps_ms": [1.0, 2.5], "usage": {"a": {"b": [1, {}]}}})
            del r["itl_p95_ms"]
        elif kind == 6:
            r["segments"] = {"tenant": f"t{i % 4}"}
        elif kind == 7:
            r["output_values"] = [1.0, -0.0, 1e-7]
        elif kind == 8:
            r = dict(reversed(list(r.items())))  # another key order
        elif kind == 9:
            del r["model"]
        out.append(r)
    # numbers spelled in every JSON way, written raw (json.dumps would normalise them)
    spellings = ["1e5", "1E+2", "0.5e-3", "-0.0", "0", "0.0", "12345678901", "1000000000000", "7.000"]
    for j, s in enumerate(spellings):
        out.append('{"request_id": "n%02d", "latency_ms": %s, "ttft_ms":%s ,"tokens_in" : %s, '
                   '"memory_pressure": %s}' % (j, s, s, "1000000000000" if j % 2 else "0",
                                               "1" if j % 3 == 0 else "0.25"))
    return out


@pytest.mark.parametrize("run_chars", [200, 900, 1 << 16, 10**9])
@pytest.mark.parametrize("separator", [",\n", " , ", ",", "\n,\t"])
def test_runs_give_the_columns_of_the_exact_path_on_edge_cases(tmp_path, json_windows, run_chars, separator):
    path = _write(tmp_path, _edge_requests(), separator)
    json_windows(run_chars)
    assert _columns(read_side(path, "b", registry=Registry())) == _columns(_exact(path))


@pytest.mark.parametrize("bad,where,message", [
    ('"latency_ms": NaN', "$.requests[41].latency_ms", "NaN is not valid JSON"),
    ('"latency_ms": -Infinity', "$.requests[41].latency_ms", "-Infinity is not valid JSON"),
    ('"latency_ms": -1e5', "$.requests[41].latency_ms", "expected milliseconds"),
    ('"latency_ms": true', "$.requests[41].latency_ms", "expected milliseconds"),
    ('"latency_ms": null', "$.requests[41].latency_ms", "expected milliseconds"),
    ('"latency_ms": "fast"', "$.requests[41].latency_ms", "expected milliseconds"),
    ('"latency_ms": 1e13', "$.requests[41].latency_ms", "expected milliseconds"),
    ('"latency_ms": 1e400', "$.requests[41].latency_ms", "expected milliseconds"),
    ('"latency_ms": 1.0, "tokens_in": 1' + "0" * 400, "$.requests[41].tokens_in", "expected a count"),
    ('"latency_ms": 1.0, "tokens_in": 2.0', "$.requests[41].tokens_in", "expected a count"),
    ('"latency_ms": 1.0, "tokens_in": 1000000000001', "$.requests[41].tokens_in", "expected a count"),
    ('"latency_ms": 1.0, "memory_pressure": 1.5', "$.requests[41].memory_pressure", "expected a fraction"),
    ('"latency_ms": 1.0, "model": null', "$.requests[41].model", "expected a string"),
    ('"latency_ms": 1.0, "model": 7', "$.requests[41].model", "expected a string"),
    ('"latency_ms": 1.0, "latency": 7', "$.requests[41]", "unknown keys ['latency']"),
    ('"latency_ms": 1.0, "request_id": "r003"', "$.requests[41].request_id", "duplicate request_id 'r003'"),
])
def test_a_bad_request_deep_in_a_run_fails_exactly_as_before(tmp_path, json_windows, bad, where, message):
    requests = [json.dumps({k: v for k, v in dict(BASE, request_id=f"r{i:03d}").items() if k != "latency_ms"})
                for i in range(80)]
    given = set(re.findall(r'"(\w+)":', bad))  # given anew, not twice (a member given twice is refused)
    own = {k: v for k, v in json.loads(requests[41]).items() if k not in given}
    requests[41] = json.dumps(own)[:-1] + ", " + bad + "}"
    path = _write(tmp_path, requests)
    for run_chars in (300, 10**9):
        json_windows(run_chars)
        with pytest.raises(InputError) as err:
            read_side(path, "b", registry=Registry())
        assert err.value.json_path == where and message in err.value.message
        assert err.value.line == 3 + 41


def test_uniform_mixed_and_exact_batches_build_the_same_side():
    rng = random.Random(3)
    batch = []
    for i in range(500):
        r = dict(BASE, request_id=f"u{i:04d}", latency_ms=rng.choice([0, 1, 2.5, -0.0, 1e12, 3]),
                 memory_pressure=rng.choice([0, 1, 0.25]), model=rng.choice(["a", "b", "c"]),
                 error=rng.choice([None, None, "boom", ""]))
        batch.append(r)
    mixed = [dict(r) for r in batch]
    del mixed[7]["route"]  # another shape: the per-key path
    exact, fast, per_key = Side("b", "x"), Side("b", "x"), Side("b", "x")
    for i, r in enumerate(batch):
        exact.add(r, lambda sub, msg: InputError("x", msg))
    assert add_batch(fast, batch)
    assert _columns(fast) == _columns(exact)
    exact2 = Side("b", "x")
    for r in mixed:
        exact2.add(r, lambda sub, msg: InputError("x", msg))
    assert add_batch(per_key, mixed)
    assert _columns(per_key) == _columns(exact2)


@pytest.mark.parametrize("change", [
    lambda b: b[5].update(model=None),
    lambda b: b[5].update(latency_ms=None),
    lambda b: b[5].update(tokens_in=True),
    lambda b: b[5].update(route=["x"]),
    lambda b: b[5].update(extra=1),
    lambda b: b[5].pop("model"),  # another shape, still valid: accepted by the per-key path
    lambda b: b.__setitem__(5, [1, 2]),
    lambda b: b[5].update(request_id=b[4]["request_id"]),
    lambda b: b[5].update(request_id=""),
    lambda b: b[5].update(streaming={"complete": True}),
    lambda b: b[5].update(tokens_in=10**400),  # beyond any double
    lambda b: b[5].update(latency_ms=float("inf")),
    lambda b: b[5].update(latency_ms=-1e-300),
    lambda b: b[5].update(latency_ms=1e12 + 1),
    lambda b: b[5].update(memory_pressure=1.0000001),
])
def test_a_batch_the_fast_path_declines_leaves_the_side_unchanged(change):
    batch = [dict(BASE, request_id=f"d{i:03d}") for i in range(20)]
    change(batch)
    side = Side("b", "x")
    assert add_batch(side, [dict(BASE, request_id="a")])
    before = _columns(side)
    accepted = add_batch(side, batch)
    if accepted:  # only the valid reshaped batch
        assert "model" not in batch[5]
        assert side.cats["model"].codes[6] == -1
    else:
        assert _columns(side) == before


def test_ids_out_of_order_build_the_index_and_still_catch_repeats():
    side = Side("b", "x")
    assert side.extend_ids(["a", "b", "c"]) and side._index is None  # in order: no index needed
    assert side.extend_ids(["d"]) and side._index is None
    assert not side.extend_ids(["e", "b"])  # a repeat of an earlier id
    assert side.ids == ["a", "b", "c", "d"]
    assert side.extend_ids(["z", "e"])  # out of order: the index takes over
    assert side.index == {"a": 0, "b": 1, "c": 2, "d": 3, "z": 4, "e": 5}
    assert not side.extend_ids(["f", "f"]) and not side.extend_ids(["e"])
    assert side.extend_ids(["y"]) and side.index["y"] == 6 and side.extend_ids([])


@pytest.mark.parametrize("ids,fingerprints", [
    ([], []),
    (["a"], [None]),
    (["", "x\u0000y", "z"], ["f", "g", "h"]),
    (["a", "b"], ["", ""]),
    (["é", "☃"], [None, "x"]),
])
def test_a_side_survives_the_compact_pickle(ids, fingerprints):
    side = Side("b", "x")
    side.ids, side.fingerprints = list(ids), list(fingerprints)
    back = pickle.loads(pickle.dumps(side))
    assert back.ids == ids and back.fingerprints == fingerprints
    assert back.index == dict(zip(ids, range(len(ids))))


def _side(label: str, ids: list[str], rng: random.Random) -> Side:
    side = Side(label, label)
    for rid in ids:
        side.add(dict(BASE, request_id=rid, latency_ms=rng.random()), lambda sub, msg: InputError("x", msg))
    side.finish()
    side.has_requests = True
    return side


def test_join_of_sides_in_the_same_order_equals_the_general_join(monkeypatch):
    ids = [f"r{i:04d}" for i in range(300)]
    b, c = _side("b", ids, random.Random(1)), _side("c", ids, random.Random(2))
    fast = join(b, c)
    from tickgate.gate import comparison as join_module

    monkeypatch.setattr(join_module, "ascending", lambda ids: False)
    slow = join(b, c)
    assert (list(fast.pairs_b), list(fast.pairs_c), fast.baseline_only, fast.candidate_only) == \
           (list(slow.pairs_b), list(slow.pairs_c), slow.baseline_only, slow.candidate_only)
    assert fast.aligned("candidate", "latency_ms") is c.num["latency_ms"]  # used as it is


def _comparison(n: int, rng: random.Random, *, models: int = 2, nan_every: int = 0, skew: bool = False,
                extra_models: int = 0) -> Comparison:
    ids = [f"r{i:06d}" for i in range(n)]
    sides = []
    for label in ("baseline", "candidate"):
        side = Side(label, label)
        if label == "candidate":  # values first seen in unmatched rows: large category codes
            for j in range(extra_models):
                extra = dict(BASE, request_id=f"x{j:04d}", model=f"extra{j}")
                side.add(extra, lambda s, m: InputError("x", m))
        for i, rid in enumerate(ids):
            r = dict(BASE, request_id=rid, model=f"m{i % models}", accelerator=("h100", "a100")[(i >> 1) % 2],
                     latency_ms=round(rng.lognormvariate(7, 0.5) * (0.2 if skew and i % models == 0 else 1),
                                      3),
                     ttft_ms=rng.choice([1.0, 2.0, 2.0, 3.0]))  # many ties
            if nan_every and i % nan_every == 0:
                del r["latency_ms"]
            side.add(r, lambda s, m: InputError("x", m))
        side.finish()
        side.has_requests = True
        sides.append(side)
    return join(sides[0], sides[1])


@pytest.mark.parametrize("shape", [
    dict(n=25000), dict(n=25000, skew=True), dict(n=25000, models=3, nan_every=97), dict(n=3000),
    dict(n=25000, models=20), dict(n=21000, extra_models=300),
])
def test_segment_quantiles_equal_selecting_from_the_segment(shape):
    comp = _comparison(rng=random.Random(11), **shape)
    for key in ("model", "accelerator"):
        for value in comp.groups(key):
            for which in ("baseline", "candidate"):
                for column in ("latency_ms", "ttft_ms"):
                    for q in (0.5, 0.95, 0.999):
                        want = select_quantile(comp.in_group(which, column, key, value), q)
                        got = comp.group_quantile(which, column, key, value, q)
                        assert repr(got) == repr(want), (key, value, which, column, q)  # NaN too


@pytest.mark.parametrize("extra_models", [0, 5, 300])
def test_groups_by_code_equal_groups_by_value(monkeypatch, extra_models):
    keys = ("model", "accelerator", "route", "backend", "scheduler", "tenant")
    comp = _comparison(5000, random.Random(2), models=3, extra_models=extra_models)
    fast = {k: list(comp.groups(k).items()) for k in keys}
    sizes = {k: list(comp.group_sizes(k).items()) for k in keys}
    monkeypatch.setattr(Comparison, "_masks", lambda self, key: None)
    plain = _comparison(5000, random.Random(2), models=3, extra_models=extra_models)
    assert fast == {k: list(plain.groups(k).items()) for k in keys}
    assert sizes == {k: [(v, len(rows)) for v, rows in plain.groups(k).items()] for k in keys}
    assert sizes == {k: list(plain.group_sizes(k).items()) for k in keys}


@pytest.mark.parametrize("q", [0.0, 0.05, 0.5, 0.95, 1.0])
def test_tail_quantiles_equal_sorting(q):
    rng = random.Random(5)
    values = [float(rng.randint(0, 50)) for _ in range(30000)]  # heavy ties
    tail = tails.Tail(values, q)
    whole = tail.quantile()
    assert whole is None or whole == quantile(sorted(values), q)
    for modulus in (2, 3, 7):
        select = bytes(int(i % modulus == 0) for i in range(len(values)))
        part = [v for v, s in zip(values, select) if s]
        got = tail.quantile(select, len(part))
        assert got is None or got == quantile(sorted(part), q)
    low = bytes(int(v < 10) for v in values)
    got = tail.quantile(low, sum(low))
    assert got == quantile(sorted(v for v in values if v < 10), q) if got is not None else q > 0.1


@pytest.mark.parametrize("clean", [True, False])
def test_fast_paths_give_the_same_report_as_the_plain_paths(tmp_path, monkeypatch, json_windows, clean):
    """A 21k-pair gate with a regressed segment, skewed and many-valued
    segments (and, unless clean, errors, missing values and unmatched
    requests), through every speed path and then with them all switched off."""
    from tickgate.gate import comparison as join_module
    from tickgate.gate.pipeline import run_gate
    from tickgate.gate.config import load_gate_config
    from tickgate.host.policy import load_policy

    rng = random.Random(8)
    base, cand = [], []
    for i in range(21000):
        r = dict(BASE, request_id=f"r{i:06d}", model=f"m{i % 3}", accelerator=("h100", "a100")[(i >> 1) % 2],
                 route=f"/r{i % 19}",
                 latency_ms=round(rng.lognormvariate(7, 0.5) * (0.3 if i % 3 == 0 else 1), 3),
                 ttft_ms=round(rng.lognormvariate(4, 0.3), 3), memory_pressure=round(rng.random(), 4))
        base.append(r)
        c = dict(r, latency_ms=round(r["latency_ms"] * (1.25 if i % 3 == 1 else rng.uniform(0.97, 1.03)), 3))
        if i % 101 == 0 and not clean:
            c["error"] = "boom"
        if i % 89 == 0 and not clean:
            del c["ttft_ms"]
        cand.append(c)
    bpath = _write(tmp_path, base, name="b.json")
    cpath = _write(tmp_path, cand if clean else cand[7:] + [dict(BASE, request_id="zz-only")], name="c.json")
    config = load_gate_config(load_policy(POLICIES / "gate-default.yaml"))

    def reports() -> str:
        return json.dumps(run_gate(read_side(bpath, "baseline"), read_side(cpath, "candidate"), config))

    fast = reports()
    json_windows(None)
    monkeypatch.setattr(tails, "MIN_VALUES", 10**9)
    monkeypatch.setattr(join_module, "ascending", lambda ids: False)
    monkeypatch.setattr(Comparison, "_masks", lambda self, key: None)
    monkeypatch.setattr(Side, "extend_ids", lambda self, ids: False)  # every batch: the exact path
    assert fast == reports()
