"""A small, strict msgpack decoder (no dependency) for KV-event payloads.

vLLM and SGLang publish KV-cache events as msgpack (msgspec-encoded
``EventBatch`` structs). Only the types those payloads use are needed: nil,
booleans, integers, floats, str, bin and containers; ext types are refused.
Every error names the byte offset, so a truncated capture says where it ends.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from ..errors import InputError

MAX_DEPTH = 64


class _Truncated(Exception):
    def __init__(self, offset: int) -> None:
        self.offset = offset


class Decoder:
    """Decode consecutive msgpack objects from one buffer."""

    def __init__(self, data: bytes, path: Path | str) -> None:
        self.data = data
        self.pos = 0
        self.path = path

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def decode(self) -> Any:
        """The next object; InputError naming the byte offset when cut or invalid."""
        start = self.pos
        try:
            return self._obj(0)
        except _Truncated as exc:
            raise InputError(self.path, f"msgpack data ends inside the object that starts at byte {start} "
                             f"(needed byte {exc.offset}, file has {len(self.data)}): truncated?") from None

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise _Truncated(end)
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def _unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _obj(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise InputError(self.path, f"msgpack nesting deeper than {MAX_DEPTH} at byte {self.pos}")
        at = self.pos
        b = self._take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self._map(b & 0x0F, depth, at)
        if 0x90 <= b <= 0x9F:
            return self._array(b & 0x0F, depth)
        if 0xA0 <= b <= 0xBF:
            return self._str(b & 0x1F, at)
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        sized = {0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
        if b in sized:
            return bytes(self._take(self._unpack(sized[b])))
        numbers = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
                   0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
        if b in numbers:
            return self._unpack(numbers[b])
        strs = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I"}
        if b in strs:
            return self._str(self._unpack(strs[b]), at)
        if b in (0xDC, 0xDD):
            return self._array(self._unpack(">H" if b == 0xDC else ">I"), depth)
        if b in (0xDE, 0xDF):
            return self._map(self._unpack(">H" if b == 0xDE else ">I"), depth, at)
        raise InputError(self.path, f"unsupported msgpack type byte 0x{b:02x} at byte {at} "
                         "(ext types and reserved bytes are not KV-event data)")

    def _str(self, n: int, at: int) -> str:
        raw = self._take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(self.path, f"msgpack string at byte {at} is not UTF-8") from None

    def _array(self, n: int, depth: int) -> list[Any]:
        if n > len(self.data) - self.pos:
            raise _Truncated(self.pos + n)
        return [self._obj(depth + 1) for _ in range(n)]

    def _map(self, n: int, depth: int, at: int) -> dict[Any, Any]:
        if 2 * n > len(self.data) - self.pos:
            raise _Truncated(self.pos + 2 * n)
        out: dict[Any, Any] = {}
        for _ in range(n):
            key = self._obj(depth + 1)
            if isinstance(key, (list, dict)):
                raise InputError(self.path, f"msgpack map at byte {at} has a container as a key")
            out[key] = self._obj(depth + 1)
        return out


def decode_all(data: bytes, path: Path | str) -> list[tuple[int, Any]]:
    """Every top-level object in a concatenated stream, with its byte offset."""
    dec = Decoder(data, path)
    out = []
    while not dec.at_end():
        start = dec.pos
        out.append((start, dec.decode()))
    return out
