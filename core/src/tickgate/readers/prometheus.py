"""Prometheus text exposition format (``/metrics`` scrapes), shared by the
vLLM, SGLang and TensorRT-LLM metric mirrors.

Only the text format 0.0.4 that engines serve is read: ``# HELP``/``# TYPE``
comments, then ``name{label="value",...} value [timestamp]`` samples. A scrape
holds cumulative counters and histograms since the server started, so what a
reader gets from one file is the server's lifetime view, not one benchmark's
(take two scrapes and subtract for a window; see docs/formats.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

import attrs

from ..util.errors import InputError
from .stats import SCHEMA_QUANTILES, histogram_quantile

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count", "_created")


@attrs.frozen
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    line: int

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


@attrs.frozen
class Histogram:
    """Buckets summed over every series of one histogram (engines, ranks)."""

    buckets: tuple[tuple[float, float], ...]
    sum: float | None
    count: float | None


@attrs.define
class Scrape:
    """One parsed ``/metrics`` text: samples in file order plus declared types."""

    samples: list[Sample]
    types: dict[str, str]

    def names(self) -> set[str]:
        """Sample names and every family declared by ``# TYPE``/``# HELP``."""
        return {s.name for s in self.samples} | set(self.types)

    def has(self, *names: str) -> bool:
        known = self.names()
        return any(n in known for n in names)

    def series(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]

    def total(self, name: str, **match: str) -> float | None:
        """Sum of a counter or gauge over all its series (None when absent)."""
        values = [
            s.value
            for s in self.series(name)
            if all(s.label(k) == v for k, v in match.items()) and not math.isnan(s.value)
        ]
        return math.fsum(values) if values else None

    def maximum(self, name: str, **match: str) -> float | None:
        values = [
            s.value
            for s in self.series(name)
            if all(s.label(k) == v for k, v in match.items()) and not math.isnan(s.value)
        ]
        return max(values) if values else None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """Values of one metric summed per value of ``label`` (sorted keys)."""
        out: dict[str, float] = {}
        for s in self.series(name):
            key = s.label(label)
            if key is not None and not math.isnan(s.value):
                out[key] = out.get(key, 0.0) + s.value
        return dict(sorted(out.items()))

    def label_values(self, label: str) -> list[str]:
        return sorted({v for s in self.samples for k, v in s.labels if k == label})

    def histogram(self, base: str) -> Histogram | None:
        """The histogram ``base`` summed across series, or None if absent."""
        per_le: dict[float, float] = {}
        for s in self.series(base + "_bucket"):
            le = s.label("le")
            if le is None:
                continue
            bound = _parse_value(le)
            if bound is None:
                continue
            per_le[bound] = per_le.get(bound, 0.0) + s.value
        total_sum = self.total(base + "_sum")
        count = self.total(base + "_count")
        if not per_le and total_sum is None and count is None:
            return None
        return Histogram(tuple(sorted(per_le.items())), total_sum, count)


def histogram_ms(h: Histogram, metric: str, notes: list[str], *, scale: float = 1000.0) -> dict[str, float]:
    """A seconds histogram as a schema ``percentiles`` object in ms.

    ``mean`` comes from ``_sum/_count``; quantiles from the buckets. A quantile
    that falls in the ``+Inf`` bucket or past a trimmed excerpt is left out and
    the omission is noted, never replaced by a bucket bound.
    """
    out: dict[str, float] = {}
    total = h.count
    if total is None and h.buckets and math.isinf(h.buckets[-1][0]):
        total = h.buckets[-1][1]
    if h.sum is not None and total:
        out["mean"] = round(h.sum / total * scale, 6)
    missing = []
    for key, q in SCHEMA_QUANTILES.items():
        if key == "p999":
            continue
        value = histogram_quantile(q, h.buckets, total)
        if value is None:
            missing.append(key)
        else:
            out[key] = round(value * scale, 6)
    if "p50" in out:
        out["median"] = out["p50"]
    if missing and total:
        finite = [b for b, _ in h.buckets if not math.isinf(b)]
        top = f"{finite[-1]:g} s" if finite else "no finite bucket"
        notes.append(
            f"{metric}: {', '.join(missing)} lie above the largest published bucket ({top}); omitted"
        )
    return out


def _parse_value(text: str) -> float | None:
    try:
        return float(text)  # accepts +Inf, -Inf, NaN, exponent forms like Go's ParseFloat
    except ValueError:
        return None


def parse_text(text: str, path: Path | str) -> Scrape:
    """Parse exposition text; errors name the file, line and column."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if not _NAME.fullmatch(parts[2]):
                    raise InputError(path, f"bad metric name {parts[2]!r} in # {parts[1]}", line=lineno)
                if parts[1] == "TYPE":
                    types[parts[2]] = parts[3].strip() if len(parts) > 3 else "untyped"
                else:
                    types.setdefault(parts[2], "untyped")
            continue
        samples.append(_parse_sample(raw, lineno, path))
    return Scrape(samples, types)


def _parse_sample(raw: str, lineno: int, path: Path | str) -> Sample:
    indent = len(raw) - len(raw.lstrip())
    line = raw.strip()
    m = _NAME.match(line)
    if not m:
        raise InputError(path, "expected a metric name", line=lineno, column=indent + 1)
    name = m.group(0)
    pos = m.end()
    labels: list[tuple[str, str]] = []
    if pos < len(line) and line[pos] == "{":
        pos += 1
        while True:
            while pos < len(line) and line[pos] == " ":
                pos += 1
            if pos < len(line) and line[pos] == "}":
                pos += 1
                break
            lm = _LABEL.match(line, pos)
            if not lm:
                raise InputError(path, "expected a label name or '}'", line=lineno, column=indent + pos + 1)
            pos = lm.end()
            if line[pos : pos + 2] != '="':
                raise InputError(path, 'expected =" after label name', line=lineno, column=indent + pos + 1)
            pos += 2
            value_chars: list[str] = []
            while True:
                if pos >= len(line):
                    raise InputError(path, "unterminated label value", line=lineno, column=indent + pos + 1)
                ch = line[pos]
                if ch == "\\" and pos + 1 < len(line):
                    value_chars.append(_ESCAPES.get(line[pos + 1], "\\" + line[pos + 1]))
                    pos += 2
                    continue
                if ch == '"':
                    pos += 1
                    break
                value_chars.append(ch)
                pos += 1
            labels.append((lm.group(0), "".join(value_chars)))
            if pos < len(line) and line[pos] == ",":
                pos += 1
    rest = line[pos:].split()
    if not rest or len(rest) > 2:
        raise InputError(
            path,
            "expected a sample value (and optional timestamp) after the metric",
            line=lineno,
            column=indent + pos + 1,
        )
    value = _parse_value(rest[0])
    if value is None:
        raise InputError(
            path,
            f"sample value {rest[0]!r} is not a number",
            line=lineno,
            column=indent + line.index(rest[0], pos) + 1,
        )
    return Sample(name, tuple(labels), value, lineno)


def metric_names_in(head: bytes, prefixes: Iterable[str]) -> bool:
    """Cheap sniff: does the head of a file have exposition lines for these prefixes?"""
    try:
        text = head.decode("utf-8", errors="replace")
    except Exception:  # pragma: no cover
        return False
    pattern = "|".join(re.escape(p) for p in prefixes)
    return re.search(rf"(?m)^(?:# (?:HELP|TYPE) )?(?:{pattern})[a-zA-Z0-9_:]*(?:\{{| )", text) is not None


def family_of(name: str) -> str:
    for suffix in _HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _family_key(name: str) -> str:
    base = family_of(name)
    return base[: -len("_total")] if base.endswith("_total") else base


def require_families(s: Scrape, path: Path | str, fmt: str, prefix: str, families: Iterable[str]) -> None:
    """Reject a scrape with the format's prefix but none of the metric families
    its reader maps (``families`` without the prefix; counters with or without
    ``_total``): it would give a run with no figures. See
    :func:`tickgate.readers.common.not_this_format`."""
    from .common import not_this_format

    wanted = sorted(families)
    keys = {_family_key(prefix + f) for f in wanted}
    present = s.names()
    if any(_family_key(n) in keys for n in present):
        return
    ours = sorted({family_of(n) for n in present if n.startswith(prefix)})
    raise not_this_format(
        path,
        fmt,
        f"a scrape with at least one {prefix} metric this reader maps ({', '.join(wanted)})",
        found=ours,
        found_what="metrics",
    )
