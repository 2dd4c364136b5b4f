"""Per-request streaming evidence from OpenAI-compatible chunk events.

What a stream proves about a request: when its first token arrived, the gaps
between tokens, how many tokens and chunks came, why it finished, the usage
the server reported, and whether the stream reached its end. Times are only
given when the capture has receive timestamps (``timestamps: "receive"``);
chunk ``created`` fields are whole seconds set once per request, so they are
never turned into token times (``timestamps: "none"``).

A request is one ``id`` (plus the choice index when ``n > 1``). It is complete
when a chunk carried a ``finish_reason`` or ``[DONE]`` followed it; a capture
cut mid-way leaves the requests it interrupted incomplete: partial evidence,
not an error.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError
from ..util.locations import json_path
from ..util.quantile import quantile
from .common import not_this_format
from .sse import DONE, Event, Framed


@attrs.define
class _Stream:
    request_id: str
    model: str | None = None
    text: list[str] = attrs.Factory(list)
    token_times: list[float | None] = attrs.Factory(list)
    token_chunks: int = 0
    chunks: int = 0
    timed: bool = True
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    done: bool = False
    obj: str | None = None


@attrs.frozen
class StreamEvidence:
    """Evidence for one request, plus what an observation needs besides it."""

    request_id: str
    model: str | None
    streaming: dict[str, Any]
    text: str
    usage: dict[str, Any] | None


def _delta_text(choice: dict[str, Any], path: Path | str, where: str, line: int) -> str:
    parts = []
    delta = choice.get("delta")
    if delta is not None and not isinstance(delta, dict):
        raise InputError(
            path,
            f"'delta' must be an object, got {type(delta).__name__}",
            line=line,
            json_path=f"{where}.delta",
        )
    sources = [(delta or {}).get("content"), (delta or {}).get("reasoning_content"), choice.get("text")]
    for value in sources:
        if value is None:
            continue
        if not isinstance(value, str):
            raise InputError(
                path, f"token text must be a string, got {type(value).__name__}", line=line, json_path=where
            )
        parts.append(value)
    return "".join(parts)


def collect(
    framed: Framed, path: Path | str, fmt: str = "OpenAI-compatible stream"
) -> tuple[list[StreamEvidence], dict[str, Any]]:
    """Group chunk events by request; return evidence sorted by request id and
    facts about the capture (objects seen, usage placement) for version notes.

    A capture in which no chunk has ``choices`` is not a completion stream
    (``fmt`` names the format in that error), whatever ids it carries."""
    streams: dict[str, _Stream] = {}
    current: list[_Stream] = []
    facts: dict[str, Any] = {
        "objects": set(),
        "usage_on_content_chunk": False,
        "usage_chunk_without_choices": False,
        "usage_on_finish_chunk": False,
        "usage_null_fields": False,
        "reasoning": False,
        "stop_reason": False,
        "matched_stop": False,
        "done": False,
        "choices": False,
    }
    for ev in framed.events:
        if ev.payload == DONE:
            facts["done"] = True
            for s in current:
                s.done = True
            continue
        _take_chunk(ev, streams, current, facts, path)
    if not streams:
        raise InputError(path, "no stream chunks found (expected objects with an 'id' and 'choices')")
    if not facts["choices"]:
        first = next(ev for ev in framed.events if ev.payload != DONE)
        raise not_this_format(
            path,
            fmt,
            "completion stream chunks with 'id' and 'choices' (no chunk has 'choices')",
            found=first.payload,
            line=first.line,
            json_path="$",
        )
    out = []
    for rid in sorted(streams):
        out.append(_evidence(streams[rid]))
    facts["objects"] = sorted(facts["objects"])
    facts["cut_at_line"] = framed.cut_at_line
    return out, facts


def _take_chunk(
    ev: Event, streams: dict[str, _Stream], current: list[_Stream], facts: dict[str, Any], path: Path | str
) -> None:
    chunk = ev.payload
    rid = chunk.get("id")
    if not isinstance(rid, str) or not rid:
        raise InputError(path, "stream chunk has no string 'id'", line=ev.line, json_path="$.id")
    choices = chunk.get("choices", [])
    facts["choices"] = facts["choices"] or "choices" in chunk
    if not isinstance(choices, list):
        raise InputError(
            path,
            f"'choices' must be a list, got {type(choices).__name__}",
            line=ev.line,
            json_path="$.choices",
        )
    obj = chunk.get("object")
    if isinstance(obj, str):
        facts["objects"].add(obj)
    usage = chunk.get("usage")
    if "usage" in chunk and usage is None:
        facts["usage_null_fields"] = True
    if usage is not None and not isinstance(usage, dict):
        raise InputError(
            path,
            f"'usage' must be an object or null, got {type(usage).__name__}",
            line=ev.line,
            json_path="$.usage",
        )
    model = chunk.get("model") if isinstance(chunk.get("model"), str) else None
    touched: list[_Stream] = []
    for i, choice in enumerate(choices):
        where = json_path(["choices", i])
        if not isinstance(choice, dict):
            raise InputError(path, "each choice must be an object", line=ev.line, json_path=where)
        index = choice.get("index", 0)
        key = rid if index == 0 else f"{rid}:{index}"
        s = streams.setdefault(key, _Stream(key))
        s.model = s.model or model
        s.chunks += 1
        s.timed = s.timed and ev.recv_ms is not None
        text = _delta_text(choice, path, where, ev.line)
        if isinstance((choice.get("delta") or {}).get("reasoning_content"), str):
            facts["reasoning"] = True
        if "stop_reason" in choice:
            facts["stop_reason"] = True
        if "matched_stop" in choice:
            facts["matched_stop"] = True
        if text:
            s.text.append(text)
            s.token_chunks += 1
            s.token_times.append(ev.recv_ms)
        reason = choice.get("finish_reason")
        if reason is not None:
            if not isinstance(reason, str):
                raise InputError(
                    path,
                    "'finish_reason' must be a string or null",
                    line=ev.line,
                    json_path=f"{where}.finish_reason",
                )
            s.finish_reason = reason
            if usage is not None:
                facts["usage_on_finish_chunk"] = True
        elif usage is not None and text:
            facts["usage_on_content_chunk"] = True
        touched.append(s)
    if not choices:
        # a usage-only chunk (choices: []) belongs to every choice of this id
        owners = [s for k, s in streams.items() if k == rid or k.startswith(rid + ":")]
        if not owners:
            owners = [streams.setdefault(rid, _Stream(rid, model=model))]
        for s in owners:
            s.chunks += 1
        touched = owners
        if usage is not None:
            facts["usage_chunk_without_choices"] = True
    if usage is not None:
        for s in touched:
            s.usage = usage
    current[:] = touched


def _evidence(s: _Stream) -> StreamEvidence:
    complete = s.finish_reason is not None or s.done
    streaming: dict[str, Any] = {"complete": complete, "chunk_count": s.chunks}
    usage_tokens = (s.usage or {}).get("completion_tokens")
    if isinstance(usage_tokens, int) and not isinstance(usage_tokens, bool) and usage_tokens >= 0:
        streaming["token_count"] = usage_tokens
    else:
        streaming["token_count"] = s.token_chunks
    streaming["finish_reason"] = s.finish_reason
    if s.usage is not None:
        streaming["usage"] = dict(sorted(s.usage.items()))
    times = [t for t in s.token_times if t is not None]
    if s.timed and s.token_chunks and len(times) == s.token_chunks:
        streaming["timestamps"] = "receive"
        streaming["first_token_ms"] = round(times[0], 6)
        streaming["gaps_ms"] = [round(max(0.0, b - a), 6) for a, b in itertools.pairwise(times)]
    else:
        streaming["timestamps"] = "none"
    return StreamEvidence(s.request_id, s.model, dict(sorted(streaming.items())), "".join(s.text), s.usage)


def fingerprint(text: str) -> str:
    """Identity of an output text for exact comparison (sha256 of UTF-8)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def evidence_to_request(ev: StreamEvidence, backend: str) -> dict[str, Any]:
    """An observation request carrying the stream's evidence.

    The output fingerprint is only given for a complete stream: a cut stream's
    partial text would read as an output mismatch.
    """
    req: dict[str, Any] = {"request_id": ev.request_id, "backend": backend}
    if ev.model:
        req["model"] = ev.model
    st = ev.streaming
    usage = ev.usage or {}
    prompt = usage.get("prompt_tokens")
    if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0:
        req["tokens_in"] = prompt
    req["tokens_out"] = st["token_count"]
    if st["complete"]:
        req["output_fingerprint"] = fingerprint(ev.text)
    if st["timestamps"] == "receive":
        req["ttft_ms"] = st["first_token_ms"]
        req["itl_ms"] = list(st["gaps_ms"])
        if st["gaps_ms"]:
            gaps = sorted(st["gaps_ms"])
            req["itl_p95_ms"] = round(quantile(gaps, 0.95), 6)
    req["streaming"] = st
    return req
