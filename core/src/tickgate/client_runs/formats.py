"""The ``aiperf`` and ``genai-perf`` workload readers: a run of either client, replayed.

Both read the file through the gate's own reader of it (:mod:`tickgate.readers.aiperf`,
:mod:`tickgate.readers.genai_perf_requests`); :class:`~tickgate.client_runs.reader.ClientRunReader`
turns the observations into requests. What each format records exactly and what is inferred is in
docs/importers.md ("Benchmark-client runs").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..readers.common import Fields, is_number, load_engine_json
from ..util.errors import InputError
from .reader import ClientRunReader

#: characters per prompt token when a genai-perf run comes without its summary (a common rule of
#: thumb for English text and BPE tokenizers; only ever an estimate)
CHARS_PER_TOKEN = 4.0


class AiperfReader(ClientRunReader):
    """aiperf ``profile_export.jsonl``: one record per request with its send time
    (``request_start_ns``) and the client's token counts of prompt and output."""

    name = "aiperf"
    description = "aiperf profile_export.jsonl: what the client sent (send times, prompt/output tokens)."
    id_prefix = "ap"
    file_kind = "JSONL"
    seed: ClassVar[int] = 0  # aiperf's --random-seed default; unused: every record has its send time

    def observations(self, path: Path) -> dict[str, Any]:
        from ..readers.aiperf import AiperfMirror

        return AiperfMirror().read(path)

    def per_request_hint(self) -> str:
        return "profile_export.jsonl (one record per request), not the summary export"

    def concurrency(self, path: Path, extra: Mapping[str, Any]) -> int | None:
        """The records do not say how requests were issued; the summary beside them does
        (``profile_export_aiperf.json``, ``input_config.phases``: a profiling phase with
        ``concurrency`` ran closed-loop)."""
        summary = path.parent / "profile_export_aiperf.json"
        if not summary.is_file():
            self.source["issue_mode"] = "unknown (no profile_export_aiperf.json beside the records)"
            return None
        f = Fields(load_engine_json(summary), summary)
        config = f.sub("input_config")
        phases = config.array("phases") if config is not None else None
        for i, phase in enumerate(phases or []):
            if not isinstance(phase, dict) or phase.get("kind", "profiling") != "profiling":
                continue
            value = phase.get("concurrency")
            if value is None:
                continue
            if type(value) is not int or value < 1:
                raise InputError(
                    summary,
                    f"expected a concurrency >= 1, found {value!r}",
                    json_path=f"$.input_config.phases[{i}].concurrency",
                )
            self.source["issue_mode"] = f"closed loop: {summary.name} input_config.phases[{i}].concurrency"
            return value
        self.source["issue_mode"] = f"open loop ({summary.name} names no concurrency)"
        return None


class GenaiPerfReader(ClientRunReader):
    """genai-perf ``profile_export.json`` (perf_analyzer's per-request export): send and response
    timestamps and the request bodies, but no token counts."""

    name = "genai-perf"
    description = "genai-perf profile_export.json: what the client sent (send times, lengths inferred)."
    id_prefix = "gp"
    seed: ClassVar[int] = 0  # unused: every request has its send time

    def observations(self, path: Path) -> dict[str, Any]:
        from ..readers.genai_perf_requests import read_profile_export

        doc = read_profile_export(path, "genai-perf")
        self._prompt_chars = _prompt_chars(path)
        self._chars_per_token = self._scale(path)
        return doc

    def concurrency(self, path: Path, extra: Mapping[str, Any]) -> int | None:
        value = extra.get("experiment_concurrency")  # perf_analyzer's --concurrency-range point
        if value is None:
            return None
        return super().concurrency(path, {"max_concurrency": value})

    def _scale(self, path: Path) -> float:
        """Characters per token: the run's mean prompt length in characters over the mean input
        sequence length genai-perf reported beside the file (``profile_export_genai_perf.json``),
        else :data:`CHARS_PER_TOKEN`."""
        summary = path.parent / "profile_export_genai_perf.json"
        chars = self._prompt_chars
        if summary.is_file() and chars:
            f = Fields(load_engine_json(summary), summary)
            isl = f.sub("input_sequence_length")
            avg = isl.obj.get("avg") if isl is not None else None
            if is_number(avg) and avg is not None and avg > 0:
                self.source["prompt_tokens"] = (
                    f"inferred: prompt characters scaled to the mean input_sequence_length {avg:g} "
                    f"of {summary.name}"
                )
                return (sum(chars) / len(chars)) / avg
        self.source["prompt_tokens"] = (
            f"inferred: prompt characters / {CHARS_PER_TOKEN:g} (no {summary.name} beside the file)"
        )
        return CHARS_PER_TOKEN

    def lengths(self, path: Path, index: int, observed: Mapping[str, Any]) -> tuple[int, int]:
        """Prompt: its characters over the run's characters per token. Output: the responses that
        carried content (the first token's, then one per inter-token gap): one per token when the
        server streams a token per chunk, as vLLM and SGLang do."""
        self.source["output_tokens"] = "inferred: content responses (one streamed chunk per token)"
        prompt = max(1, round(self._prompt_chars[index] / self._chars_per_token))
        return prompt, len(observed.get("itl_ms", ())) + 1


def _prompt_chars(path: Path) -> list[int]:
    """Characters of each request's prompt (its messages' text, or the completion prompt), in
    the order :func:`~tickgate.readers.genai_perf_requests.read_profile_export` lists the
    requests (send order, file order on ties). That reader has validated the file."""
    raw = load_engine_json(path)["experiments"][0]["requests"]
    by_send = sorted(raw, key=lambda r: r["timestamp"])
    chars = []
    for r in by_send:
        body = json.loads(r["request_inputs"]["payload"])
        prompt = body.get("messages", body.get("prompt", body.get("text_input", "")))
        chars.append(len(_text(prompt)))
    return chars


def _text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "".join(_text(p) for p in prompt)
    if isinstance(prompt, dict):
        content = prompt.get("content", prompt.get("text", ""))
        return _text(content)
    return ""
