"""The ``genai-perf`` backend mirror: Triton genai-perf's per-request
``profile_export.json`` (see :mod:`.genai_perf_requests`) and its
``profile_export_genai_perf.json`` and ``.csv`` summaries (aggregate-only).

Same metric objects as AIPerf's summary (``{unit, avg, p25..p99, min, max,
std}``); recognised by genai-perf's ``input_config`` keys (``subcommand``,
``service_kind``, ``profile_export_file``) or its CSV header
``Metric,avg,min,max,p99,p95,p90,p75,p50,p25``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import BackendMirror
from ..util.errors import InputError
from .aiperf import looks_like_genai_perf
from .common import Fields, clean_aggregates, document, head_text, load_engine_json, provenance, read_text
from .genai_perf_requests import looks_like_profile_export, read_profile_export
from .profile_export import aggregates_from_json, parse_csv, require_summary


class GenaiPerfMirror(BackendMirror):
    name: ClassVar[str] = "genai-perf"
    description: ClassVar[str] = (
        "genai-perf profile_export.json (per request), profile_export_genai_perf.json / .csv summaries"
    )
    #: what ``genai-perf profile`` writes into ``artifacts/<model>-<endpoint>-<mode>/``, per request first
    artifact_files: ClassVar[tuple[str, ...]] = (
        "profile_export.json",
        "profile_export_genai_perf.json",
        "profile_export_genai_perf.csv",
    )

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head).lstrip()
        if text.startswith("Metric,avg,min,max,p99,") or looks_like_profile_export(text):
            return True
        return (
            text.startswith("{")
            and '"request_throughput"' in text
            and '"unit"' in text
            and looks_like_genai_perf(head)
        )

    def read(self, path: Path) -> dict[str, Any]:
        text = read_text(path)
        if not text.strip():
            raise InputError(path, "empty file: expected a genai-perf export")
        notes: list[str] = []
        if looks_like_profile_export(text[:65536].lstrip()):
            return read_profile_export(path, self.name)
        if text.lstrip().startswith("Metric"):
            agg = parse_csv(text, path, notes)
            return document(
                {"provenance": provenance(path, self.name, "csv", notes), "aggregates": clean_aggregates(agg)}
            )
        f = Fields(load_engine_json(path), path, notes=notes)
        require_summary(f, self.name, "a profile_export_genai_perf.json summary")
        agg = aggregates_from_json(f, notes)
        model = backend = None
        cfg = f.sub("input_config")
        if cfg is not None:
            models = cfg.array("model")
            if models and isinstance(models[0], str):
                model = models[0]
            backend = cfg.string("backend")
            if cfg.obj.get("streaming") is True:
                notes.append(
                    "streaming run: genai-perf 24.11-24.12 over-counted streamed output tokens "
                    "(maintainers, perf_analyzer#298); compare token counts across versions with care"
                )
        return document(
            {
                "model": model,
                "backend": backend,
                "provenance": provenance(path, self.name, "profile-export-json", notes),
                "aggregates": clean_aggregates(agg),
            }
        )
