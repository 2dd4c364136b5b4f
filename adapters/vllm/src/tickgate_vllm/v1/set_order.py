"""Iteration order of a CPython 3.11 ``set`` of strings, computed without ``hash()``.

Why this exists: vLLM's scheduler collects ``finished_req_ids`` in a Python
``set`` (a fresh ``set()`` each step, filled by ``.add(req_id)`` as requests
finish, never shrunk) and later walks it with ``for req_id in ...``. Anything
downstream that depends on that walk (event order, freeing order) follows the
set's *table order*, not insertion order. The reference harness runs vLLM on
CPython 3.11 with ``PYTHONHASHSEED=0``, so that order is a pure function of the
strings and their insertion order. tickgate has to reproduce it in any process,
whatever that process's own ``PYTHONHASHSEED`` is, so nothing here calls the
running interpreter's ``hash()``: the string hash and the hash table are both
re-implemented.

Followed (CPython 3.11 branch, written independently, not copied):

* ``Python/pyhash.c``: ``siphash13()`` (SipHash-1-3, 64-bit), ``_Py_HashBytes()``
  (empty input hashes to 0, ``Py_HASH_CUTOFF`` is 0 so no small-string path,
  a result of -1 becomes -2) and ``Python/bootstrap_hash.c``
  ``_Py_HashRandomization_Init()`` (seed 0 means an all-zero 128-bit key).
* ``Objects/unicodeobject.c``: ``unicode_hash()`` hashes the canonical compact
  representation, 1, 2 or 4 bytes per code point (``PyUnicode_KIND``).
* ``Objects/setobject.c``: ``set_add_entry()`` (probe runs of ``LINEAR_PROBES``
  + 1 adjacent slots when they fit below ``mask``, then
  ``i = (i * 5 + 1 + perturb) & mask`` with ``perturb >>= PERTURB_SHIFT``; resize
  when ``fill * 5 >= mask * 3``), ``set_table_resize()`` (smallest power of two
  above ``minused``, starting at ``PySet_MINSIZE``; old slots re-inserted in
  table order) and ``set_insert_clean()``; ``setiter_iternext()`` walks the
  table from slot 0.

Assumes a 64-bit little-endian build (``Py_hash_t`` is 64-bit; UCS-2/UCS-4 data
is native-endian), which is what the reference harness runs on.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

__all__ = ["set_order", "siphash13", "str_hash"]

_M64 = (1 << 64) - 1
_PYSET_MINSIZE = 8
_LINEAR_PROBES = 9
_PERTURB_SHIFT = 5


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def _round(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    """One SipHash compression round (two half rounds, rotations 13/16 then 17/21)."""
    v0 = (v0 + v1) & _M64
    v2 = (v2 + v3) & _M64
    v1 = _rotl(v1, 13) ^ v0
    v3 = _rotl(v3, 16) ^ v2
    v0 = _rotl(v0, 32)
    v2 = (v2 + v1) & _M64
    v0 = (v0 + v3) & _M64
    v1 = _rotl(v1, 17) ^ v2
    v3 = _rotl(v3, 21) ^ v0
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def _siphash13_u64(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """Unsigned SipHash-1-3 of ``data``: 1 round per 8-byte word, 3 finalisation rounds."""
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    full = n & ~7
    for off in range(0, full, 8):
        m = int.from_bytes(data[off : off + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        v0 ^= m
    # Last block: the tail bytes, little-endian, with the length's low byte on top.
    b = ((n & 0xFF) << 56) | int.from_bytes(data[full:], "little")
    v3 ^= b
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= 0xFF
    for _ in range(3):
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def siphash13(data: bytes) -> int:
    """``hash(data)`` for ``bytes`` under CPython 3.11+ with ``PYTHONHASHSEED=0``.

    Returns the signed ``Py_hash_t``: 0 for empty input, and -2 where the raw
    hash would be -1 (-1 is CPython's error marker), as ``_Py_HashBytes`` does.
    """
    if not data:
        return 0
    x = _siphash13_u64(bytes(data))
    if x >= 1 << 63:
        x -= 1 << 64
    return -2 if x == -1 else x


@lru_cache(maxsize=1 << 16)
def str_hash(s: str) -> int:
    """``hash(s)`` for a ``str`` under CPython 3.11+ with ``PYTHONHASHSEED=0``.

    CPython hashes the string's internal buffer, whose width is set by the
    largest code point: latin-1 (1 byte), UCS-2 (2) or UCS-4 (4), native
    little-endian. ``surrogatepass`` lets lone surrogates through, as they are
    ordinary code points in a ``str``. Cached: request ids recur every step.
    """
    top = max(map(ord, s), default=0)
    if top < 0x100:
        data = s.encode("latin-1")
    elif top < 0x10000:
        data = s.encode("utf-16-le", "surrogatepass")
    else:
        data = s.encode("utf-32-le", "surrogatepass")
    return siphash13(data)


def _insert_clean(keys: list, mask: int, key: str, h: int) -> None:
    """Place a key known to be absent (``set_insert_clean``): first empty slot on its probe path."""
    perturb = h & _M64
    i = perturb & mask
    while True:
        stop = i + _LINEAR_PROBES if i + _LINEAR_PROBES <= mask else i
        for j in range(i, stop + 1):
            if keys[j] is None:
                keys[j] = (key, h)
                return
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


def _find(keys: list, mask: int, key: str, h: int) -> int:
    """Slot where ``set_add_entry`` would put ``key``, or -1 if it is already there."""
    perturb = h & _M64
    i = perturb & mask
    while True:
        stop = i + _LINEAR_PROBES if i + _LINEAR_PROBES <= mask else i
        for j in range(i, stop + 1):
            e = keys[j]
            if e is None:
                return j
            if e[1] == h and e[0] == key:
                return -1
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


def set_order(items: Iterable[str]) -> list[str]:
    """The order ``list(s)`` gives after ``s = set(); for x in items: s.add(x)``.

    Simulates CPython 3.11's set table (no deletions, so no dummy slots and
    ``fill == used``). Duplicates are ignored, as ``set.add`` does. The order
    matches ``PYTHONHASHSEED=0`` under 3.11 whatever this process's seed.
    """
    items = list(items)
    if len(items) < 2:
        return items  # 0 or 1 element: nothing to order (and no hash needed)
    mask = _PYSET_MINSIZE - 1
    keys: list = [None] * _PYSET_MINSIZE  # slot -> (key, hash) or None
    used = 0
    for key in items:
        h = str_hash(key)
        slot = _find(keys, mask, key, h)
        if slot < 0:
            continue  # already present
        keys[slot] = (key, h)
        used += 1
        if used * 5 >= mask * 3:  # fill == used: nothing is ever removed
            minused = used * 2 if used > 50000 else used * 4
            newsize = _PYSET_MINSIZE
            while newsize <= minused:
                newsize <<= 1
            old = keys
            mask = newsize - 1
            keys = [None] * newsize
            for e in old:
                if e is not None:
                    _insert_clean(keys, mask, e[0], e[1])
    return [e[0] for e in keys if e is not None]
