"""Summary keys and per-request arrays of the Python bench clients.

``vllm bench serve`` (benchmark_serving.py) and ``sglang.bench_serving`` share
a lineage and a layout: summary statistics as flat keys
``{mean,median,std,pNN}_{metric}_ms`` in milliseconds, and (with
``--save-detailed`` / ``--output-details``) index-aligned per-request arrays
``input_lens, output_lens, ttfts, itls, generated_texts, errors`` whose times
are in **seconds**. Both adapters read them with these functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..util.errors import InputError
from ..util.quantile import quantile
from .common import (
    Fields,
    is_number,
    iter_json_lines,
    parse_engine_json,
    pick_line,
    read_text,
    require_any_key,
)
from .streams import fingerprint

_STAT = re.compile(r"^(mean|median|std|min|max|p(\d+(?:\.\d+)?))_(.+)_ms$")
_SCHEMA_P = {"50": "p50", "90": "p90", "95": "p95", "99": "p99", "99.9": "p999"}
ARRAY_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")


def summary_percentiles(
    f: Fields, metrics: Mapping[str, str], extra: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Collect ``{stat}_{metric}_ms`` keys into schema percentile objects.

    ``metrics`` maps the bench's metric name (``ttft``, ``e2el``...) to the
    aggregate it feeds (``ttft_ms``, ``latency_ms``...). Percentiles the schema
    has no slot for (p25, p75...) go to ``extra`` as ``<aggregate>.pNN``.
    """
    out: dict[str, dict[str, float]] = {}
    for key in sorted(f.obj):
        m = _STAT.match(key)
        if not m or m.group(3) not in metrics:
            continue
        value = f.number(key)
        if value is None:
            continue
        target = metrics[m.group(3)]
        stat = m.group(1)
        if m.group(2) is not None:
            p = m.group(2)
            p = p[:-2] if p.endswith(".0") else p
            if p not in _SCHEMA_P:
                extra[f"{target}.p{p}"] = round(value, 6)
                continue
            stat = _SCHEMA_P[p]
        out.setdefault(target, {})[stat] = round(value, 6)
    return out


#: top-level keys both clients write and the readers read (besides the summary statistics)
RESULT_KEYS = (
    "completed",
    "duration",
    "request_throughput",
    "output_throughput",
    "total_input_tokens",
    "total_output_tokens",
)


def require_result(
    f: Fields, fmt: str, metrics: Mapping[str, str], keys: tuple[str, ...] = RESULT_KEYS
) -> None:
    """Reject an object with none of a bench result's keys (see
    :func:`tickgate.readers.common.require_any_key`): a forced ``--format`` on
    unrelated JSON is an error, not a run with empty aggregates."""

    def stat_key(key: str) -> bool:
        m = _STAT.match(key)
        return m is not None and m.group(3) in metrics

    stats = "{mean,median,std,pNN}_{" + ",".join(metrics) + "}_ms"
    require_any_key(
        f,
        fmt,
        (*keys, "ttfts", "output_lens"),
        also=stat_key,
        expected=f"a bench result: at least one of {', '.join(keys)}, {stats} "
        "or the per-request arrays ttfts/output_lens",
    )


def result_object(
    path: Path, line: int | None, expected: str, *, whole_document: bool = False
) -> tuple[int | None, Any, list[str]]:
    """The run a results file holds: ``(line number, JSON value, notes)``.

    The clients append one JSON line per run (``--append-result``,
    ``--output-file``): the last line is read unless ``line`` (``FILE#LINE``)
    selects another, and the choice is noted. With ``whole_document`` the file
    may instead be one JSON document (``--save-result``, pretty-printed or
    not), whose line number is None. ``expected`` names the format in the
    error for an empty file.
    """
    text = read_text(path)
    if not text.strip():
        raise InputError(path, f"empty file: expected {expected}")
    notes: list[str] = []
    stripped = text.strip()
    if not whole_document or ("\n" in stripped and stripped.startswith("{") and _is_jsonl(stripped)):
        lineno, obj = pick_line(path, list(iter_json_lines(path, text)), line, "result", notes)
        return lineno, obj, notes
    if line is not None and line != 1:
        raise InputError(path, f"holds one result; there is no run on line {line}")
    return None, parse_engine_json(text, path), notes


def _is_jsonl(text: str) -> bool:
    """A JSON document spread over lines, or one object per line?"""
    first = text.split("\n", 1)[0].strip()
    if not first.endswith("}"):
        return False
    try:
        parse_engine_json(first, "<probe>")
    except InputError:
        return False
    return True


def result_figures(
    f: Fields,
    metrics: Mapping[str, str],
    counts: tuple[str, ...],
    extra_numbers: tuple[str, ...],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, int | None]]:
    """The summary figures of a result: ``(aggregates, extra, counts)``.

    Read in one order, so the first bad field is the one reported: the
    statistics (:func:`summary_percentiles`), the client's ``counts`` (returned
    as they are: each client places them), duration, throughputs and token
    totals (into the aggregates), then the client's ``extra_numbers``.
    """
    extra: dict[str, Any] = {}
    agg: dict[str, Any] = dict(summary_percentiles(f, metrics, extra))
    counted = {key: f.count(key) for key in counts}
    agg["duration_s"] = f.number("duration")
    agg["request_throughput"] = f.number("request_throughput")
    agg["output_throughput"] = f.number("output_throughput")
    agg["total_input_tokens"] = f.count("total_input_tokens")
    agg["total_output_tokens"] = f.count("total_output_tokens")
    for key in extra_numbers:
        v = f.number(key)
        if v is not None:
            extra[key] = v
    return agg, extra, counted


def request_rate(f: Fields, extra: dict[str, Any], words: tuple[str, ...], expected: str) -> None:
    """``request_rate`` into ``extra``: a number, ``"inf"`` for an infinite rate
    (the string, or Python's bare ``Infinity``), or one of the client's own
    ``words``; anything else is an error saying it ``expected`` those."""
    rate = f.obj.get("request_rate")
    if isinstance(rate, str) and rate in words:
        extra["request_rate"] = rate
    elif is_number(rate):
        extra["request_rate"] = "inf" if rate == float("inf") else f.number("request_rate")
    elif rate is not None:
        raise f.fail("request_rate", f"expected {expected}, got {rate!r}")


def has_arrays(obj: Mapping[str, Any]) -> bool:
    return isinstance(obj.get("ttfts"), list) and isinstance(obj.get("output_lens"), list)


def requests_from_arrays(
    f: Fields, *, backend: str, model: str | None, notes: list[str]
) -> list[dict[str, Any]]:
    """One observation per index of the per-request arrays (seconds -> ms).

    Request ids are positions in the bench's prompt list: two runs with the
    same dataset, seed and prompt count send the same prompts in the same
    order, so position is the join key. The prompt's length in the client's
    own tokens (``input_lens``) is its ``prompt_identity``, so the gate can
    tell when the two runs did not send the same prompts (another seed or
    dataset) instead of comparing unrelated requests. Failed requests
    (non-empty ``errors`` entry) carry the error and no times.
    ``start_times`` (vllm bench serve, seconds on the client's monotonic
    clock) become ``start_ms``, counted from the run's first send.
    """
    arrays = {k: f.array(k) for k in (*ARRAY_KEYS, "latencies", "start_times")}
    present = {k: v for k, v in arrays.items() if v is not None}
    n = len(present["ttfts"])
    for key, values in present.items():
        if len(values) != n:
            raise f.fail(key, f"has {len(values)} entries but ttfts has {n}: per-request arrays must align")
    width = max(5, len(str(n - 1)))
    errors = present.get("errors") or [""] * n
    itls_all = present.get("itls") or [[]] * n
    requests = []
    derived_latency = False
    starts = present.get("start_times")
    # monotonic-clock seconds: only differences mean anything, so times count from the first send
    first_start = min((v for v in starts if is_number(v)), default=0.0) if starts else 0.0
    for i in range(n):
        req: dict[str, Any] = {"request_id": f"{i:0{width}d}", "backend": backend}
        if model:
            req["model"] = model
        err = errors[i]
        if err not in (None, "") and not isinstance(err, str):
            raise f.fail("errors", f"entry {i} must be a string, got {type(err).__name__}")
        req["error"] = err or None
        for key, out_key in (("input_lens", "tokens_in"), ("output_lens", "tokens_out")):
            if key in present:
                v = present[key][i]
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise InputError(
                        f.path,
                        f"expected a token count, got {v!r}",
                        line=f.line,
                        json_path=f"{f.where(key)}[{i}]",
                    )
                req[out_key] = v
        if "tokens_in" in req:
            req["prompt_identity"] = f"tokens:{req['tokens_in']}"
        if "start_times" in present:
            start = _seconds(f, "start_times", i, present["start_times"][i])
            req["start_ms"] = round((start - first_start) * 1000, 6)
        if not req["error"]:
            ttft = _seconds(f, "ttfts", i, present["ttfts"][i])
            itls = itls_all[i]
            if not isinstance(itls, list):
                raise InputError(
                    f.path, "expected a list of seconds", line=f.line, json_path=f"{f.where('itls')}[{i}]"
                )
            gaps = [_seconds(f, f"itls[{i}]", j, v) for j, v in enumerate(itls)]
            req["ttft_ms"] = round(ttft * 1000, 6)
            req["itl_ms"] = [round(g * 1000, 6) for g in gaps]
            if gaps:
                req["itl_p95_ms"] = round(quantile(sorted(req["itl_ms"]), 0.95), 6)
            if "latencies" in present:
                req["latency_ms"] = round(_seconds(f, "latencies", i, present["latencies"][i]) * 1000, 6)
            else:
                req["latency_ms"] = round((ttft + sum(gaps)) * 1000, 6)
                derived_latency = True
            texts = present.get("generated_texts")
            if texts is not None:
                text = texts[i]
                if not isinstance(text, str):
                    raise InputError(
                        f.path,
                        f"expected a string, got {type(text).__name__}",
                        line=f.line,
                        json_path=f"{f.where('generated_texts')}[{i}]",
                    )
                req["output_fingerprint"] = fingerprint(text)
        requests.append(req)
    if derived_latency:
        notes.append(
            "per-request latency_ms = ttft + sum(itls) (arrival of the last chunk); "
            "the file has no 'latencies' array"
        )
    notes.append("request ids are positions in the bench's prompt list (same dataset and seed: same prompts)")
    return requests


def _seconds(f: Fields, key: str, i: int, v: Any) -> float:
    if not is_number(v) or not (v == v) or v < 0 or v == float("inf"):
        raise InputError(
            f.path,
            f"expected seconds (a number >= 0), got {v!r}",
            line=f.line,
            json_path=f"{f.prefix}.{key}[{i}]",
        )
    return float(v)
