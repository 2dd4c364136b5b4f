"""genai-perf's per-request ``profile_export.json`` (perf_analyzer's profile
export) as per-request observations.

The file is ``{"experiments": [{"experiment": {mode, value}, "requests": [...]}],
"version", "service_kind", "endpoint"}``; each request has ``timestamp`` (send
time, ns), ``request_inputs.payload`` (the request body as a JSON string),
``response_timestamps`` (ns) and ``response_outputs`` (the raw SSE text of
each response). Times follow genai-perf's own parser
(``genai_perf/profile_data_parser/llm_profile_data_parser.py``): responses
without content are dropped first (the role-only first chunk, ``[DONE]``, a
usage chunk), then TTFT = first content response - send, request latency =
last content response - send, and the gaps between content responses are the
inter-token gaps (one streamed chunk per token, as vLLM and SGLang stream;
genai-perf re-tokenizes the text to divide a chunk's gap among its tokens,
tickgate has no tokenizer and does not).

The join key is the request's position in send order: perf_analyzer walks
the input dataset (``inputs.json``) in order, so the n-th request of two runs
of the same dataset sends the same prompt. The prompt itself is in the file,
so ``prompt_identity`` is a hash of the messages (or the completion
prompt): a different dataset or order is caught, never compared.

Failed requests: genai-perf has no error field; it skips requests without a
content response. tickgate counts such a request as failed (the client got
no answer), with the server's error body when a response carried one (an
``{"error": ...}`` object or a non-SSE body such as ``Internal Server Error``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

from ..util.errors import InputError
from ..util.jsonio import JsonProblem, loads
from ..util.quantile import quantile
from .aggregate import from_requests
from .common import Fields, clean_aggregates, document, is_number, load_engine_json, provenance
from .streams import fingerprint


def looks_like_profile_export(text: str) -> bool:
    return (
        text.startswith("{")
        and '"experiments"' in text
        and ('"response_timestamps"' in text or '"request_inputs"' in text)
    )


def read_profile_export(path: Path, fmt: str) -> dict[str, Any]:
    data = load_engine_json(path)
    notes: list[str] = []
    f = Fields(data, path, notes=notes)
    experiments = f.array("experiments")
    if experiments is None:
        raise f.fail("experiments", "expected perf_analyzer's list of experiments")
    if len(experiments) != 1:
        raise f.fail(
            "experiments",
            f"holds {len(experiments)} experiments; genai-perf writes one per "
            "profile_export.json, gate one experiment's file at a time",
        )
    exp = Fields(experiments[0], path, prefix="$.experiments[0]", notes=notes)
    raw = exp.array("requests")
    if raw is None:
        raise exp.fail("requests", "expected the experiment's list of requests")
    parsed = [
        _request(Fields(r, path, prefix=f"{exp.where('requests')}[{i}]", notes=notes))
        for i, r in enumerate(raw)
    ]
    parsed.sort(key=lambda r: r[0])  # send order = dataset order
    first = parsed[0][0] if parsed else 0
    width = max(5, len(str(len(parsed) - 1)))
    requests = []
    model = None
    for i, (sent, req, req_model) in enumerate(parsed):
        req = {"request_id": f"{i:0{width}d}", **req, "start_ms": round((sent - first) / 1e6, 6)}
        requests.append(req)
        model = model or req_model
    spec = exp.sub("experiment")
    mode = spec.string("mode") if spec is not None else None
    value = spec.obj.get("value") if spec is not None else None
    notes.append(
        "request ids are positions in send order (perf_analyzer sends the dataset in order); "
        "prompt_identity hashes each request's messages"
    )
    notes.append(
        "inter-token gaps are the gaps between content responses (one streamed chunk per token); "
        "a request with no content response counts as failed (genai-perf skips it)"
    )
    agg = from_requests(requests)
    if mode and is_number(value):
        agg["extra"] = {f"experiment_{mode}": value}
    run = {
        "model": model,
        "backend": f.string("service_kind"),
        "provenance": provenance(
            path,
            fmt,
            f"profile-export-{f.string('version') or 'unknown'}",
            notes,
            metadata={"endpoint": f.string("endpoint")} if f.string("endpoint") else None,
        ),
        "aggregates": clean_aggregates(agg),
    }
    return document(run, requests)


def _ns(f: Fields, value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(
            f.path, f"expected a timestamp in ns (an integer >= 0), got {value!r}", json_path=where
        )
    return value


def _request(f: Fields) -> tuple[int, dict[str, Any], str | None]:
    """(send time ns, observation without id/start, model named in the payload)."""
    sent = _ns(f, f.obj.get("timestamp"), f.where("timestamp"))
    inputs = f.sub("request_inputs", required=True)
    assert inputs is not None
    payload_text = inputs.string("payload", required=True)
    try:
        payload = loads(payload_text or "")
    except JsonProblem as exc:
        raise inputs.fail("payload", f"the request body has a {exc.msg} (at {exc.json_path})") from None
    except json.JSONDecodeError as exc:
        raise inputs.fail("payload", f"expected the request body as a JSON string: {exc.msg}") from None
    if not isinstance(payload, dict):
        raise inputs.fail("payload", "expected the request body as a JSON object")
    model = payload["model"] if isinstance(payload.get("model"), str) else None
    prompt = payload.get("messages", payload.get("prompt", payload.get("text_input")))
    req: dict[str, Any] = {}
    if prompt is not None:
        canonical = json.dumps(prompt, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        req["prompt_identity"] = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]
    times = f.array("response_timestamps") or []
    outputs = f.array("response_outputs") or []
    if len(times) != len(outputs):
        raise f.fail(
            "response_outputs", f"has {len(outputs)} entries but response_timestamps has {len(times)}"
        )
    content_times: list[int] = []
    texts: list[str] = []
    error: str | None = None
    for j, (t, out) in enumerate(zip(times, outputs)):
        t = _ns(f, t, f"{f.where('response_timestamps')}[{j}]")
        body = out.get("response") if isinstance(out, dict) else None
        if not isinstance(body, str):
            where = f"{f.where('response_outputs')}[{j}]"
            raise InputError(f.path, 'expected {"response": <text>}', json_path=where)
        try:
            text, problem = _content(body)
        except JsonProblem as exc:
            where = f"{f.where('response_outputs')}[{j}].response"
            raise InputError(
                f.path, f"a response chunk has a {exc.msg} (at {exc.json_path})", json_path=where
            ) from None
        if problem is not None and error is None:
            error = problem
        if text:
            content_times.append(t)
            texts.append(text)
    if not content_times:
        req["error"] = error or "no content in any response"
        return sent, req, model
    req["error"] = None
    req["ttft_ms"] = round((content_times[0] - sent) / 1e6, 6)
    req["latency_ms"] = round((content_times[-1] - sent) / 1e6, 6)
    gaps = [round((b - a) / 1e6, 6) for a, b in itertools.pairwise(content_times)]
    req["itl_ms"] = gaps
    if gaps:
        req["itl_p95_ms"] = round(quantile(sorted(gaps), 0.95), 6)
    req["output_fingerprint"] = fingerprint("".join(texts))
    return sent, req, model


def _content(body: str) -> tuple[str, str | None]:
    """(text a response carried, the error it reported). perf_analyzer may
    deliver several SSE events as one response; each ``data:`` line counts."""
    text_parts: list[str] = []
    problem: str | None = None
    events = [e.strip() for e in body.strip().split("\n\n") if e.strip()]
    for event in events:
        if not event.startswith("data:"):
            return "", f"server error: {event[:200]}"
        data = event[5:].strip()
        if data == "[DONE]":
            continue
        try:
            chunk = loads(data)
        except JsonProblem:
            raise
        except json.JSONDecodeError:
            return "", f"unreadable response: {data[:200]}"
        if isinstance(chunk, dict) and chunk.get("error") is not None:
            err = chunk["error"]
            message = err.get("message", err) if isinstance(err, dict) else err
            problem = f"server error: {message}"
            continue
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not choices or not isinstance(choices[0], dict):
            continue  # a usage-only chunk
        choice = choices[0]
        for holder, key in (
            (choice.get("delta"), "content"),
            (choice, "text"),
            (choice.get("message"), "content"),
        ):
            if isinstance(holder, dict) and isinstance(holder.get(key), str):
                text_parts.append(holder[key])
                break
    return "".join(text_parts), problem
