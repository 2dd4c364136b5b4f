"""The ``aiperf`` backend mirror: NVIDIA AIPerf profile exports.

* ``profile_export.jsonl``: one record per request, ``{"metadata": {...},
  "metrics": {name: {"value", "unit"}}, "error": null | {code, type, message}}``
  -> per-request observations (aggregates computed from them);
* ``profile_export_aiperf.json``: run summary, one ``{unit, avg, pNN...}``
  object per metric -> run-level aggregates;
* ``profile_export_aiperf.csv``: the same summary as CSV sections.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import BackendMirror
from ..util.errors import InputError
from .aggregate import from_requests
from .common import (
    Fields,
    clean_aggregates,
    document,
    head_text,
    iter_json_lines,
    load_engine_json,
    provenance,
    read_text,
)
from .profile_export import aggregates_from_json, parse_csv, require_summary
from .stats import summarize

_SUMMARY_MARKERS = (
    '"benchmark_duration"',
    '"telemetry_data"',
    '"error_summary"',
    '"aiperf_version"',
    '"loadgen"',
    '"good_request_count"',
)
_UNIT_TO_MS = {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "us": 0.001, "ns": 1e-6}


def _sniff_kind(head: bytes) -> str | None:
    text = head_text(head).lstrip()
    header = text.split("\n", 1)[0].rstrip("\r")
    # aiperf's summary CSV: p1 first among the percentiles (0.13 adds a sum column before them);
    # genai-perf's starts with p99 (Metric,avg,min,max,p99,...)
    if header.startswith(("Metric,avg,min,max,p1,", "Metric,avg,min,max,sum,p1,")):
        return "csv"
    if not text.startswith("{"):
        return None
    first = text.split("\n", 1)[0]
    if (
        '"metadata"' in first
        and '"metrics"' in first
        and ('"x_request_id"' in first or '"request_start_ns"' in first)
    ):
        return "records"
    if (
        '"request_throughput"' in text
        and '"unit"' in text
        and any(m in text for m in _SUMMARY_MARKERS)
        and not looks_like_genai_perf(head)
    ):
        return "summary"
    return None


class AiperfMirror(BackendMirror):
    name: ClassVar[str] = "aiperf"
    description: ClassVar[str] = "AIPerf profile exports: per-request JSONL, summary JSON, summary CSV"
    #: what ``aiperf profile`` writes into its artifact directory, per request first
    artifact_files: ClassVar[tuple[str, ...]] = (
        "profile_export.jsonl",
        "profile_export_aiperf.json",
        "profile_export_aiperf.csv",
    )

    def sniff(self, path: Path, head: bytes) -> bool:
        return _sniff_kind(head) is not None

    def read(self, path: Path) -> dict[str, Any]:
        text = read_text(path)
        if not text.strip():
            raise InputError(path, "empty file: expected an AIPerf export")
        kind = _sniff_kind(text[:65536].encode("utf-8"))
        notes: list[str] = []
        if kind == "csv":
            agg = parse_csv(text, path, notes)
            return document(
                {
                    "backend": None,
                    "provenance": provenance(path, self.name, "csv", notes),
                    "aggregates": clean_aggregates(agg),
                }
            )
        if kind == "records":
            return self._records(path, text, notes)
        data = load_engine_json(path)
        f = Fields(data, path, notes=notes)
        require_summary(
            f,
            self.name,
            "per-request records (JSONL lines with 'metadata' and 'metrics') "
            "or a profile_export_aiperf.json summary",
        )
        agg = aggregates_from_json(f, notes)
        model = backend = None
        cfg = f.sub("input_config")
        if cfg is not None:
            endpoint = cfg.sub("endpoint")
            names = endpoint.array("model_names") if endpoint else None
            if names and isinstance(names[0], str):
                model = names[0]
        version = f.string("aiperf_version") or f.string("schema_version") or "summary-json"
        return document(
            {
                "model": model,
                "backend": backend,
                "provenance": provenance(path, self.name, version, notes),
                "aggregates": clean_aggregates(agg),
            }
        )

    def _records(self, path: Path, text: str, notes: list[str]) -> dict[str, Any]:
        """Per-request records, keyed by the dataset entry they sent.

        AIPerf gives every request a fresh ``x_request_id`` (a UUID) in every
        run, so that id never joins two runs. The dataset entry is
        ``conversation_id`` + ``turn_index`` (``session_000017:0``): the same
        in two runs of the same dataset. A conversation sent more than once
        in a run (the dataset is smaller than the request count) gets
        ``#2``, ``#3``... in the order the requests were issued, which the
        same dataset, sampler and seed reproduce. Records of files without a
        conversation id keep ``x_request_id``.
        """
        keyed: list[tuple[tuple[Any, ...], int, dict[str, Any]]] = []
        starts: list[int] = []
        for lineno, record in iter_json_lines(path, text):
            f = Fields(record, path, line=lineno, notes=notes)
            req, key, start = _request(f, lineno)
            keyed.append((key, lineno, req))
            if start is not None:
                starts.append(start)
        first = min(starts, default=0)
        seen: dict[str, int] = {}
        by_entry = any(key[0] == 0 for key, _, _ in keyed)
        requests: list[dict[str, Any]] = []
        for key, lineno, req in sorted(keyed, key=lambda k: (k[0], k[1])):
            rid = req["request_id"]
            if rid in seen:
                if key[0] != 0:
                    raise InputError(
                        path,
                        f"request {rid!r} also on line {seen[rid]}",
                        line=lineno,
                        json_path="$.metadata.x_request_id",
                    )
                n = 2
                while f"{rid}#{n}" in seen:
                    n += 1
                rid = req["request_id"] = f"{rid}#{n}"
            seen[rid] = lineno
            start = req.pop("_start_ns", None)
            if start is not None:
                req["start_ms"] = round((start - first) / 1e6, 6)
            requests.append(req)
        requests.sort(key=lambda r: r["request_id"])
        if by_entry:
            notes.append(
                "request ids are dataset entries (conversation_id:turn_index; '#N' for the N-th send "
                "of an entry): AIPerf's x_request_id is new in every run"
            )
        notes.append("run aggregates computed by tickgate from the per-request records")
        return document(
            {
                "provenance": provenance(path, self.name, "records-jsonl", notes),
                "aggregates": clean_aggregates(from_requests(requests)),
            },
            requests,
        )


def _metric_ms(metrics: Fields, name: str) -> float | list[float] | None:
    m = metrics.sub(name)
    if m is None:
        return None
    unit = m.string("unit") or "ms"
    if unit not in _UNIT_TO_MS:
        raise m.fail("unit", f"expected a time unit ({', '.join(_UNIT_TO_MS)}), got {unit!r}")
    value = m.obj.get("value")
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            item = Fields({"v": v}, m.path, line=m.line, prefix=f"{m.where('value')}[{i}]", notes=m.notes)
            num = item.number("v", required=True)
            out.append(round((num or 0.0) * _UNIT_TO_MS[unit], 6))
        return out
    num = m.number("value")
    return None if num is None else round(num * _UNIT_TO_MS[unit], 6)


def _request(f: Fields, lineno: int) -> tuple[dict[str, Any], tuple[Any, ...], int | None]:
    """One record -> (observation, sort key, send time in ns). The key sorts
    by dataset entry, then by send time, so repeats are numbered in issue order."""
    meta = f.sub("metadata", required=True)
    metrics = f.sub("metrics") or Fields({}, f.path, line=lineno, prefix="$.metrics")
    assert meta is not None
    conversation = meta.string("conversation_id")
    turn = meta.count("turn_index")
    start = meta.count("request_start_ns")
    if conversation:
        rid = f"{conversation}:{turn if turn is not None else 0}"
        key: tuple[Any, ...] = (0, conversation, turn or 0, start if start is not None else 0)
    else:
        rid = meta.string("x_request_id") or f"line-{lineno}"
        key = (1, rid)
    req: dict[str, Any] = {"request_id": rid}
    if start is not None:
        req["_start_ns"] = start
    err = f.sub("error")
    if err is not None:
        kind = err.string("type") or "error"
        msg = err.string("message") or ""
        code = err.count("code")
        req["error"] = f"{kind}{f' ({code})' if code is not None else ''}: {msg}".rstrip(": ")
    elif meta.obj.get("was_cancelled") is True:
        req["error"] = "cancelled"
    else:
        req["error"] = None
    for name, field in (("time_to_first_token", "ttft_ms"), ("request_latency", "latency_ms")):
        v = _metric_ms(metrics, name)
        if isinstance(v, list):
            raise metrics.fail(name, "expected a single value")
        if v is not None:
            req[field] = v
    gaps = _metric_ms(metrics, "inter_chunk_latency")
    if isinstance(gaps, list):
        req["itl_ms"] = gaps
        if gaps:
            req["itl_p95_ms"] = summarize(gaps)["p95"]
    for names, field in (
        (("input_sequence_length", "error_isl"), "tokens_in"),
        (("output_sequence_length",), "tokens_out"),
    ):
        for name in names:
            m = metrics.sub(name)
            if m is not None and m.count("value") is not None:
                req[field] = m.count("value")
                break
    if "tokens_in" in req:  # the client's own token count of the prompt it sent
        req["prompt_identity"] = f"tokens:{req['tokens_in']}"
    return req, key, start


def looks_like_genai_perf(head: bytes) -> bool:
    text = head_text(head)
    return bool(re.search(r'"(subcommand|service_kind|profile_export_file)"', text))
