"""tickgate_vllm.v1.set_order against the real interpreter.

The module re-implements CPython 3.11's str hash (PYTHONHASHSEED=0) and set
table so that vLLM's ``finished_req_ids`` iteration order can be reproduced in
any process. The oracle is ``hash()`` / ``list(set)`` in a child interpreter
started with PYTHONHASHSEED=0; the comparison is only meaningful when this
interpreter is CPython 3.11+ with siphash13, so those tests skip otherwise.
Pinned values (taken from CPython 3.11.7, PYTHONHASHSEED=0) run everywhere.
"""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tickgate_vllm.v1 import set_order as v1_set_order
from tickgate_vllm.v1.set_order import set_order, siphash13, str_hash

_SRC = str(Path(v1_set_order.__file__).resolve().parents[2])

needs_cpython311 = pytest.mark.skipif(
    not (platform.python_implementation() == "CPython" and sys.version_info >= (3, 11)
         and sys.hash_info.algorithm == "siphash13" and sys.hash_info.width == 64
         and sys.byteorder == "little"),
    reason="the oracle is hash()/set of a 64-bit little-endian CPython 3.11+ using siphash13",
)


def _run(code: str, payload: object, seed: str) -> object:
    """Run ``code`` in a child interpreter with PYTHONHASHSEED=seed; JSON in on stdin, JSON out."""
    env = dict(os.environ, PYTHONHASHSEED=seed)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), env=env,
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


_HASH_CODE = "import json,sys; print(json.dumps([hash(s) for s in json.load(sys.stdin)]))"
_SET_CODE = """import json, sys
res = []
for case in json.load(sys.stdin):
    s = set()
    for x in case:
        s.add(x)
    res.append(list(s))
print(json.dumps(res))
"""
_MODULE_CODE = """import json, sys
from tickgate_vllm.v1.set_order import set_order
print(json.dumps([set_order(c) for c in json.load(sys.stdin)]))
"""


def _strings() -> list[str]:
    rng = random.Random(0)
    fixed = ["", "0", "1", "req-17", "req-0", "cmpl-abc123-0", "a" * 7, "a" * 8, "a" * 9,
             "é", "ÿ", "café-7", "中文", "req-中", "\u0100", "\uffff", "\ud800", "😀",
             "req-😀", "a\U0001F600\ud800", "\U0010ffff", "x" * 100, "y" * 257,
             "é" * 130, "中" * 101, "😀" * 100]
    alphabet = "abcXYZ019-_é中😀"
    rand = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(300)]
    return fixed + [f"req-{i}" for i in range(200)] + rand


@needs_cpython311
def test_str_hash_matches_hash_with_seed_0() -> None:
    strings = _strings()
    expected = _run(_HASH_CODE, strings, "0")
    got = [str_hash(s) for s in strings]
    bad = [(s, g, e) for s, g, e in zip(strings, got, expected) if g != e]
    assert not bad, bad[:5]


@needs_cpython311
def test_siphash13_matches_bytes_hash_with_seed_0() -> None:
    blobs = [bytes(range(n)) for n in range(0, 40)] + [b"\xff" * 300]
    code = ("import json,sys; print(json.dumps([hash(bytes.fromhex(h)) "
            "for h in json.load(sys.stdin)]))")
    expected = _run(code, [b.hex() for b in blobs], "0")
    assert [siphash13(b) for b in blobs] == expected


def test_pinned_values() -> None:
    """Values from CPython 3.11.7 with PYTHONHASHSEED=0; checked on any interpreter."""
    assert str_hash("") == 0 and siphash13(b"") == 0
    assert str_hash("0") == 5313149338359954478
    assert str_hash("req-17") == 1551525646409726158
    assert str_hash("é") == 6047309291227476195
    assert str_hash("中文") == 501833946989431548
    assert str_hash("😀") == -3536540696076613844
    assert set_order(f"req-{i}" for i in range(20)) == [
        "req-2", "req-0", "req-14", "req-1", "req-15", "req-7", "req-4", "req-3", "req-8",
        "req-16", "req-6", "req-10", "req-19", "req-17", "req-5", "req-9", "req-18",
        "req-13", "req-11", "req-12"]


def _cases() -> list[list[str]]:
    rng = random.Random(0)
    cases: list[list[str]] = [[], ["only"], ["a", "a"], [""], ["", "x", ""]]
    for n in range(0, 301):  # every size up to 300: crosses the 8->32->128->512 resizes
        cases.append([f"req-{rng.randrange(10**6)}" for _ in range(n)])
    for n in (5, 20, 60, 150, 300):  # heavy duplicates
        cases.append([f"req-{rng.randrange(n // 2 + 1)}" for _ in range(n)])
    for n in (3, 17, 90, 250):  # non-ascii ids of every width
        cases.append([f"{rng.choice(['req', 'é', '中', '😀', 'ÿ'])}-{rng.randrange(10**4)}"
                      for _ in range(n)])
    cases.append([f"cmpl-{rng.getrandbits(64):016x}-0" for _ in range(200)])
    return cases


@needs_cpython311
def test_set_order_matches_cpython_set_with_seed_0() -> None:
    cases = _cases()
    expected = _run(_SET_CODE, cases, "0")
    for case, exp in zip(cases, expected):
        assert set_order(case) == exp, (len(case), case[:5])


def test_set_order_is_a_real_reordering() -> None:
    """Guard against a vacuous oracle: set order is not insertion order nor sorted order."""
    case = [f"req-{i}" for i in range(50)]
    got = set_order(case)
    assert sorted(got) == sorted(case) and got != case and got != sorted(case)


@pytest.mark.parametrize("seed", ["1", "12345", "random"])
def test_set_order_independent_of_process_hash_seed(seed: str) -> None:
    cases = _cases()
    assert _run(_MODULE_CODE, cases, seed) == [set_order(c) for c in cases]


@needs_cpython311
def test_set_order_large_set_takes_the_used_times_2_resize() -> None:
    """80000 ids: the resize at 78643 entries is past 50000, so it grows by used*2, not used*4."""
    case = [f"req-{i}" for i in range(80000)]
    (expected,) = _run(_SET_CODE, [case], "0")
    assert set_order(case) == expected
