"""Prefix-block ids as runs: the ``prefix_block_runs`` spelling of workload
files and the vllm-v1 mirror's per-run prefix keys.

Both exist for speed (a 100k-request synthetic trace holds 6.6 million ids, one
run per request), so what is tested is that they change nothing: the same ids
come back, and two KV blocks get equal keys exactly when their token prefixes
are equal, as with the per-block hash chain they replace.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import POLICIES, run_cli
from tickgate.workload.block_runs import block_runs, expand_runs, run_starts
from tickgate.interfaces.model import Request
from tickgate.workload.format import read_workload, write_workload, WorkloadHeader
from tickgate_vllm.v1.scheduler import prompt_block_keys

# ids drawn from a small range so that runs, repeats and shared prefixes are common
ids_lists = st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=40)


def _with_runs(draws: list[int]) -> list[int]:
    """Turn draws into ids with long runs: 0 continues the run, k>0 jumps to k*7."""
    out = [draws[0] * 7]
    for d in draws[1:]:
        out.append(out[-1] + 1 if d == 0 else d * 7)
    return out


@given(ids_lists, st.booleans())
def test_runs_round_trip_and_are_maximal(draws: list[int], as_tuple: bool) -> None:
    ids = _with_runs(draws)
    seq = tuple(ids) if as_tuple else ids
    runs = block_runs(seq)
    assert expand_runs(runs) == tuple(ids)
    assert all(count >= 1 for _, count in runs)
    # maximal: a run never continues where the previous one stopped
    assert all(a + n != b for (a, n), (b, _) in zip(runs, runs[1:]))
    assert run_starts(seq) == [i for i in range(len(ids)) if i == 0 or ids[i] != ids[i - 1] + 1]


def test_runs_of_edge_cases() -> None:
    assert block_runs([]) == []
    assert block_runs((5,)) == [[5, 1]]
    assert block_runs([3, 4, 5, 3, 4]) == [[3, 3], [3, 2]]
    assert block_runs([9, 8, 7]) == [[9, 1], [8, 1], [7, 1]]
    assert block_runs([0, 2, 1]) == [[0, 1], [2, 1], [1, 1]]  # first..last spans n-1 but is not a run


def _chain_keys(ids: list[int], per: int, full: int) -> list[tuple[int, ...]]:
    """Reference: the key of KV block j is the whole id prefix it sits under plus its sub-block."""
    return [(*ids[: j // per + 1], j % per) for j in range(full)]


# few distinct jumps: requests often share run starts with different run lengths
few_jumps = st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12)


@given(st.lists(few_jumps, min_size=2, max_size=6), st.sampled_from([1, 4]), st.data())
def test_run_keys_are_equal_exactly_when_prefixes_are(draws: list[list[int]], per: int, data) -> None:
    block = 16
    requests = []
    for k, d in enumerate(draws):
        ids = _with_runs(d)
        # prompts that end inside, at, or beyond the last id's tokens
        prompt = data.draw(st.integers(min_value=1, max_value=len(ids) * per * block + 40))
        requests.append((Request(id=f"r{k}", prompt_tokens=prompt, max_output_tokens=1, prefix_blocks=tuple(ids)),
                         ids))
    if len(requests) > 1:  # a request sharing a prefix with the first, then diverging
        ids0 = requests[0][1]
        cut = data.draw(st.integers(min_value=0, max_value=len(ids0)))
        ids = ids0[:cut] + _with_runs(data.draw(few_jumps))
        requests.append((Request(id="shared", prompt_tokens=len(ids) * per * block,
                                 max_output_tokens=1, prefix_blocks=tuple(ids)), ids))
    got: list[list] = []
    want: list[list] = []
    for r, ids in requests:
        keys = prompt_block_keys(r, block, block * per)
        full = min(r.prompt_tokens // block, len(ids) * per)
        assert len(keys) == full
        got.append(keys)
        want.append(_chain_keys(ids, per, full))
    flat_got = [k for keys in got for k in keys]
    flat_want = [k for keys in want for k in keys]
    for i, (gi, wi) in enumerate(zip(flat_got, flat_want)):
        for gj, wj in zip(flat_got[i + 1:], flat_want[i + 1:]):
            assert (gi == gj) == (wi == wj)


def test_run_keys_tell_run_lengths_apart() -> None:
    # same runs starts, different run lengths before them: only the first two blocks are shared
    a = Request(id="a", prompt_tokens=64, max_output_tokens=1, prefix_blocks=(7, 8, 9, 14))
    b = Request(id="b", prompt_tokens=48, max_output_tokens=1, prefix_blocks=(7, 8, 14))
    ka, kb = prompt_block_keys(a, 16), prompt_block_keys(b, 16)
    assert ka[:2] == kb[:2] and not set(ka[2:]) & set(kb)
    # a run cut short is a prefix of the longer one
    c = Request(id="c", prompt_tokens=32, max_output_tokens=1, prefix_blocks=(7, 8))
    assert prompt_block_keys(c, 16) == ka[:2]


def _requests() -> list[Request]:
    return [
        Request(id="run", prompt_tokens=160, max_output_tokens=4, prefix_blocks=tuple(range(100, 110))),
        Request(id="scattered", prompt_tokens=64, max_output_tokens=4, prefix_blocks=(5, 9, 2, 7)),
        Request(id="mixed", prompt_tokens=160, max_output_tokens=4, prefix_blocks=(100, 101, 102, 103, 50, 51, 52, 53, 1, 3)),
        Request(id="short", prompt_tokens=32, max_output_tokens=4, prefix_blocks=(1, 2)),
        Request(id="none", prompt_tokens=32, max_output_tokens=4),
    ]


def test_writer_uses_runs_when_shorter_and_reader_expands_them(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    with path.open("w") as fh:
        write_workload(fh, WorkloadHeader(block_size=16), _requests())
    rows = {row["id"]: row for row in json.loads(path.read_text())["requests"]}
    assert rows["run"]["prefix_block_runs"] == [[100, 10]] and "prefix_blocks" not in rows["run"]
    assert rows["mixed"]["prefix_block_runs"] == [[100, 4], [50, 4], [1, 1], [3, 1]]
    assert rows["scattered"]["prefix_blocks"] == [5, 9, 2, 7] and "prefix_block_runs" not in rows["scattered"]
    assert rows["short"]["prefix_blocks"] == [1, 2]  # two ids: a run would be no shorter
    assert "prefix_blocks" not in rows["none"] and "prefix_block_runs" not in rows["none"]
    assert list(read_workload(path).requests) == _requests()


def test_a_workload_in_either_spelling_replays_identically(tmp_path: Path) -> None:
    lists = {"version": 1, "block_size": 16, "requests": [
        {"id": f"r{i}", "prompt_tokens": 200, "max_output_tokens": 3, "arrival_tick": i,
         "prefix_blocks": list(range(0, 6)) + list(range(40 + i, 46 + i))} for i in range(6)]}
    runs = json.loads(json.dumps(lists))
    for row in runs["requests"]:
        row["prefix_block_runs"] = block_runs(row.pop("prefix_blocks"))
    reports = []
    for name, doc in (("lists", lists), ("runs", runs)):
        w = tmp_path / f"{name}.json"
        w.write_text(json.dumps(doc))
        out = tmp_path / f"{name}.report.json"
        res = run_cli("replay", "--input", str(w), "--policy", str(POLICIES / "vllm-v1-bench.yaml"),
                      "--output", str(out))
        assert res.returncode == 0, res.stderr
        report = json.loads(out.read_text())
        reports.append((report["summary"]["trace_fingerprint"], report["scheduler"]["prefix_cache"]))
    assert reports[0] == reports[1]
    assert reports[0][1]["hit_tokens"] > 0  # the shared first six ids are hits


@pytest.mark.parametrize("runs,where,message", [
    ([[1]], "$.requests[0].prefix_block_runs[0]", "is too short"),
    ([[1, 0]], "$.requests[0].prefix_block_runs[0][1]", "less than the minimum of 1"),
    ([["a", 2]], "$.requests[0].prefix_block_runs[0][0]", "is not of type 'integer'"),
    ({"a": 1}, "$.requests[0].prefix_block_runs", "is not of type 'array'"),
    ([[0, 2], [999999999999999, 3]], "$.requests[0].prefix_block_runs[1]", "ends past the largest block id"),
    ([[0, 60], [100, 50]], "$.requests[0].prefix_block_runs", "110 block ids, more than the 100 prompt tokens"),
])
def test_bad_runs_are_located(tmp_path: Path, runs, where: str, message: str) -> None:
    w = tmp_path / "w.json"
    w.write_text('{"version": 1, "requests": [\n' + json.dumps(
        {"id": "a", "prompt_tokens": 100, "max_output_tokens": 2, "prefix_block_runs": runs}) + "\n]}\n")
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(w), "--policy", str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(out))
    assert res.returncode == 2
    assert f"w.json:2:1: {where}: " in res.stderr and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


def test_both_spellings_at_once_are_refused(tmp_path: Path) -> None:
    w = tmp_path / "w.json"
    w.write_text('{"version": 1, "requests": [\n' + json.dumps(
        {"id": "a", "prompt_tokens": 100, "max_output_tokens": 2, "prefix_blocks": [0, 1],
         "prefix_block_runs": [[0, 2]]}) + "\n]}\n")
    res = run_cli("replay", "--input", str(w), "--policy", str(POLICIES / "vllm-v1-bench.yaml"),
                  "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2
    assert "w.json:2:1: $.requests[0]: prefix_blocks and prefix_block_runs spell the same ids" in res.stderr


def test_more_ids_than_prompt_tokens_stay_a_list_that_reads_back(tmp_path: Path) -> None:
    # runs may not hold more ids than prompt tokens (they expand in memory); a
    # list may, so the writer keeps such a request's list and the file reads back
    r = Request(id="a", prompt_tokens=4, max_output_tokens=2, prefix_blocks=tuple(range(10, 15)))
    path = tmp_path / "w.json"
    with path.open("w") as fh:
        write_workload(fh, WorkloadHeader(), [r])
    assert json.loads(path.read_text())["requests"][0]["prefix_blocks"] == [10, 11, 12, 13, 14]
    assert list(read_workload(path).requests) == [r]


def test_ids_that_are_not_ints_still_key_by_prefix() -> None:
    # a reader plugin may yield other hashable ids: keyed per id, prefix-equal as ever
    a = Request(id="a", prompt_tokens=64, max_output_tokens=1, prefix_blocks=("x", "y", "z", "w"))
    b = Request(id="b", prompt_tokens=64, max_output_tokens=1, prefix_blocks=("x", "y", "q", "w"))
    ka, kb = prompt_block_keys(a, 16), prompt_block_keys(b, 16)
    assert len(ka) == 4 and ka[:2] == kb[:2] and not set(ka[2:]) & set(kb[2:])
    assert len(prompt_block_keys(a, 16, 32)) == 4
