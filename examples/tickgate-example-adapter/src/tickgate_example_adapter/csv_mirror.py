"""``example-csv``: the example engine's per-request CSV into neutral observations.

The format (one file per run)::

    # example-csv v2                      <- optional; names the format version
    request_id,latency_ms,ttft_ms,tokens_out,error,output_sha
    req-0001,812.5,41.0,128,,9f86d081...
    req-0002,,,,timeout,

``latency_ms``/``ttft_ms`` are milliseconds, ``tokens_out`` a whole number,
``error`` empty for success, ``output_sha`` the hex SHA-256 of the generated
text. Empty cells mean "not measured" and are left out (never guessed).

Why each piece is here:

* ``sniff`` looks only at the head (first 64 KiB) and claims nothing but the
  exact header, so auto-detection never steals another engine's CSV.
* Every bad cell is an :class:`tickgate.InputError` with the file, the
  line and the column, so a user fixes the file instead of reading a traceback.
* Provenance names the file, the format, the detected version and this
  distribution, and notes what was computed rather than read.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Iterable

from tickgate import BackendMirror, InputError

FORMAT = "example-csv"
DISTRIBUTION = "tickgate-example-adapter"
COLUMNS = ("request_id", "latency_ms", "ttft_ms", "tokens_out", "error", "output_sha")
HEADER = ",".join(COLUMNS)
#: engine outputs stay bounded: a CSV row is ~100 bytes, so this is ~10M requests
MAX_BYTES = 1024**3
MAX_MS = 1e12


def _lines(text: str) -> list[str]:
    return text.lstrip("\ufeff").splitlines()


def _version(lines: list[str]) -> tuple[str, int]:
    """(format version, index of the header line)."""
    if lines and lines[0].startswith("#"):
        words = lines[0].lstrip("#").split()
        if len(words) == 2 and words[0] == FORMAT and words[1].startswith("v"):
            return words[1], 1
        return "", -1
    return "v1", 0


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), like tickgate's reports."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"mean": round(sum(values) / len(values), 6), "p50": round(_percentile(values, 0.50), 6),
            "p95": round(_percentile(values, 0.95), 6), "p99": round(_percentile(values, 0.99), 6),
            "max": max(values)}


class ExampleCsvMirror(BackendMirror):
    name = FORMAT
    description = "example engine per-request CSV (request_id,latency_ms,ttft_ms,tokens_out,error,output_sha)"

    def sniff(self, path: Path, head: bytes) -> bool:
        lines = _lines(head.decode("utf-8", errors="replace"))
        version, at = _version(lines)
        return bool(version) and len(lines) > at and lines[at].strip() == HEADER

    def read(self, path: Path) -> dict[str, Any]:
        lines = _lines(self._text(path))
        version, at = _version(lines)
        if not version:
            raise InputError(path, f"line 1 must be '# {FORMAT} vN' or the header", line=1, column=1)
        if len(lines) <= at or lines[at].strip() != HEADER:
            raise InputError(path, f"expected the header {HEADER!r}", line=at + 1, column=1)
        requests = list(self._rows(path, lines, at + 1))
        return {"version": 1, "kind": "tickgate.observations",
                "run": {"backend": "example-engine", "provenance": {
                    "file": str(path), "format": FORMAT, "format_version": version,
                    "distribution": DISTRIBUTION,
                    "notes": ["aggregates computed from the per-request rows"]},
                    "aggregates": self._aggregates(requests)},
                "requests": requests}

    @staticmethod
    def _text(path: Path) -> str:
        try:
            if path.stat().st_size > MAX_BYTES:
                raise InputError(path, f"file is larger than {MAX_BYTES} bytes")
            return path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(path, f"not UTF-8 text (byte {exc.start})") from None
        except FileNotFoundError:
            raise InputError(path, "file not found") from None
        except IsADirectoryError:
            raise InputError(path, "is a directory, expected a file") from None
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror}") from None

    def _rows(self, path: Path, lines: list[str], start: int) -> Iterable[dict[str, Any]]:
        seen: dict[str, int] = {}
        for index in range(start, len(lines)):
            number = index + 1
            if not lines[index].strip():
                continue
            try:
                (cells,) = list(csv.reader([lines[index]], strict=True))
            except (csv.Error, ValueError) as exc:
                raise InputError(path, f"not a CSV row: {exc}", line=number, column=1) from None
            if len(cells) != len(COLUMNS):
                raise InputError(path, f"expected {len(COLUMNS)} fields ({HEADER}), found {len(cells)}",
                                 line=number, column=1)
            columns = [1]
            for cell in cells[:-1]:
                columns.append(columns[-1] + len(cell) + 1)
            row = dict(zip(COLUMNS, cells))

            def bad(key: str, message: str) -> InputError:
                where = COLUMNS.index(key)
                return InputError(path, f"{key}: {message}", line=number, column=columns[where])

            rid = row["request_id"].strip()
            if not rid:
                raise bad("request_id", "must not be empty")
            if rid in seen:
                raise bad("request_id", f"{rid!r} already on line {seen[rid]}; ids must be unique")
            seen[rid] = number
            request: dict[str, Any] = {"request_id": rid}
            for key in ("latency_ms", "ttft_ms"):
                if row[key].strip():
                    request[key] = self._ms(row[key], lambda m, k=key: bad(k, m))
            if row["tokens_out"].strip():
                text = row["tokens_out"].strip()
                if not text.isdigit() or int(text) > 10**12:
                    raise bad("tokens_out", f"expected a whole number of tokens, found {text!r}")
                request["tokens_out"] = int(text)
            if row["error"].strip():
                request["error"] = row["error"].strip()
            sha = row["output_sha"].strip().lower()
            if sha:
                if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
                    raise bad("output_sha", f"expected 64 hex digits (sha256), found {sha[:70]!r}")
                request["output_fingerprint"] = f"sha256:{sha}"
            yield request

    @staticmethod
    def _ms(text: str, bad: Any) -> float:
        try:
            value = float(text)
        except ValueError:
            raise bad(f"expected milliseconds (a number), found {text.strip()!r}") from None
        if not math.isfinite(value) or not 0 <= value <= MAX_MS:
            raise bad(f"expected milliseconds 0..{MAX_MS:g}, found {text.strip()!r}")
        return value

    @staticmethod
    def _aggregates(requests: list[dict[str, Any]]) -> dict[str, Any]:
        failed = sum(1 for r in requests if "error" in r)
        ok = [r for r in requests if "error" not in r]
        out: dict[str, Any] = {"request_count": len(requests), "completed": len(ok), "failed": failed,
                               "total_output_tokens": sum(r.get("tokens_out", 0) for r in ok)}
        if requests:
            out["error_rate"] = round(failed / len(requests), 6)
        for key in ("latency_ms", "ttft_ms"):
            stats = _summary([r[key] for r in ok if key in r])
            if stats:
                out[key] = stats
        return out
