"""Workload files: any JSON layout streams to the same requests; invalid JSON is
refused with the line and column where it goes wrong, whatever the chunking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tickgate.util.jsonstream as jsonstream
from tickgate.util.errors import InputError
from tickgate.workload.format import read_workload, request_from_dict

REQUESTS = [
    {"id": "a", "prompt_tokens": 16, "max_output_tokens": 2, "arrival_tick": 0, "prefix_blocks": [1, 2]},
    {"id": "b\u00e9\\n\"", "prompt_tokens": 123456, "max_output_tokens": 7, "arrival_tick": 3, "priority": -2},
    {"id": "c", "prompt_tokens": 1, "max_output_tokens": 1, "arrival_tick": 3, "tenant": "gold"},
]
DOC = {"version": 1, "block_size": 16, "description": "layouts", "requests": REQUESTS}


def layouts() -> dict[str, str]:
    lines = ",\n".join(json.dumps(r) for r in REQUESTS)
    return {
        "streamable": '{"version": 1, "block_size": 16, "description": "layouts", "requests": [\n' + lines + "\n]}\n",
        "one line": json.dumps(DOC),
        "pretty": json.dumps(DOC, indent=2),
        "sorted keys (version after requests)": json.dumps(DOC, indent=1, sort_keys=True),
        "crlf": json.dumps(DOC, indent=2).replace("\n", "\r\n"),
        "last request closes the list": '{"version": 1, "block_size": 16, "description": "layouts", "requests": [\n'
                                        + lines + "]}",
    }


def read(tmp_path: Path, text: str) -> tuple[object, list[object]]:
    path = tmp_path / "w.json"
    path.write_text(text, encoding="utf-8")
    workload = read_workload(path)
    return workload.header, list(workload.requests)


@pytest.mark.parametrize("name", list(layouts()))
@pytest.mark.parametrize("chunk", [1, 3, 17, 1 << 20])
def test_every_layout_and_chunking_gives_the_same_requests(tmp_path: Path, monkeypatch, name: str,
                                                           chunk: int) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    header, requests = read(tmp_path, layouts()[name])
    assert (header.version, header.block_size, header.description) == (1, 16, "layouts")
    assert requests == [request_from_dict(r) for r in REQUESTS]


HEAD = '{"version": 1, "requests": [\n'
R = '{"id": "%s", "prompt_tokens": 16, "max_output_tokens": 2}'


@pytest.mark.parametrize("text, where, message", [
    (HEAD + R % "a" + "\n" + R % "b" + "\n]}", ":3:1:", "expected ',' or ']' after a request, found '{'"),
    (HEAD + R % "a" + ",\n]}", ":3:1:", "invalid JSON: Expecting value"),
    (HEAD + R % "a" + "\n]}\n{}", ":4:1:", "unexpected content after the end of the document"),
    (HEAD + R % "a" + ",\n" + R % "b", ":3:", "after a request, found the end of the file (truncated?)"),
    (HEAD + R % "a" + ",\n", ":3:1:", "file ends before the requests list is closed (truncated?)"),
    ('{"version": 1, "version": 1, "requests": []}', ":1:", "$.version: duplicate member 'version'"),
    (HEAD + '{"id": "a", "prompt_tokens": NaN, "max_output_tokens": 2}\n]}', ":2:30:",
     "$.requests[0].prompt_tokens: invalid JSON: NaN is not valid JSON"),  # at the NaN
    (HEAD + '  {"id": "a", "prompt_tokens": "x", "max_output_tokens": 2}\n]}', ":2:3:",
     "$.requests[0].prompt_tokens: 'x' is not of type 'integer'"),
    ('{\n  "version": 2,\n  "requests": []\n}', ":2:14:", "$.version: 1 was expected"),
    ('{"version": 1}', ":1:1:", "$: 'requests' is required"),
    ('{"version": 1, "requests": {}}', "", "$.requests: expected a list of requests, found an object"),
    ("[1, 2]", "", "$: expected a JSON object with version and requests, found list"),
    ("", ":1:1:", "invalid JSON: Expecting value (the file is empty)"),
])
@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_invalid_documents_are_located(tmp_path: Path, monkeypatch, text: str, where: str, message: str,
                                       chunk: int) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    with pytest.raises(InputError) as err:
        read(tmp_path, text)
    assert f"w.json{where}" in str(err.value) and message in str(err.value), str(err.value)


ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 99), st.lists(st.integers(0, 10**12), max_size=5)),
                min_size=0, max_size=6),
       st.sampled_from([None, 1, 2, 4]), st.booleans(), st.integers(1, 40))
def test_stream_equals_the_whole_document_parse(tmp_path_factory, rows, indent, sort_keys, chunk) -> None:
    """Random workloads in random layouts, read with random chunk sizes, give
    exactly the requests ``json.loads`` of the whole document gives."""
    reqs = [{"id": f"r{i}", "prompt_tokens": p, "max_output_tokens": o, "arrival_tick": i, "prefix_blocks": pb}
            for i, (p, o, pb) in enumerate(rows)]
    text = json.dumps({"version": 1, "requests": reqs}, indent=indent, sort_keys=sort_keys)
    path = tmp_path_factory.mktemp("w") / "w.json"
    path.write_text(text)
    old = jsonstream.CHUNK
    jsonstream.CHUNK = chunk
    try:
        got = list(read_workload(path).requests)
    finally:
        jsonstream.CHUNK = old
    assert got == [request_from_dict(r) for r in json.loads(text)["requests"]]
