"""Property-based hostile input for the core readers: workload JSON and policy YAML.

Whatever the bytes, reading ends in a value or a TickgateError (one clean line
for the user), never another exception.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tickgate.util.errors import TickgateError
from tickgate.host.policy import load_policy
from tickgate.workload.format import read_workload

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12)

request_keys = st.sampled_from(["id", "prompt_tokens", "max_output_tokens", "priority", "arrival_tick",
                                "arrival_ms", "tenant", "lane", "deadline_tick", "prefix_blocks", "bogus"])
requests = st.dictionaries(request_keys, json_values, max_size=7)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])


def consume(path: Path) -> int:
    return sum(1 for _ in read_workload(path).requests)


@FUZZ
@given(st.lists(requests, max_size=5), st.booleans())
def test_workload_reader_never_crashes(tmp_path: Path, items: list, streamed: bool) -> None:
    path = tmp_path / "w.json"
    if streamed:
        body = ",\n".join(json.dumps(i) for i in items)
        path.write_text('{"version": 1, "requests": [\n' + body + "\n]}\n")
    else:
        path.write_text(json.dumps({"version": 1, "requests": items}, indent=1))
    try:
        consume(path)
    except TickgateError as exc:
        assert str(exc).startswith(str(path))


@FUZZ
@given(st.binary(max_size=300))
def test_workload_reader_survives_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "w.json"
    path.write_bytes(b'{"version": 1, "requests": [\n' + data)
    try:
        consume(path)
    except TickgateError:
        pass


@FUZZ
@given(st.text(max_size=300))
@example(text="=")  # ruamel loads it as a value-tagged scalar without a position (found by this test in CI)
@example(text="- =")
@example(text="a: =")
def test_policy_loader_survives_arbitrary_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_policy(path)
    except TickgateError as exc:
        assert str(exc).startswith(str(path))


@FUZZ
@given(st.dictionaries(st.sampled_from(["version", "scheduler", "admission", "timing", "limits", "x"]),
                       json_values, max_size=5))
def test_policy_loader_survives_arbitrary_structures(tmp_path: Path, data: dict) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    try:
        load_policy(path)
    except TickgateError as exc:
        assert str(exc).startswith(str(path))
