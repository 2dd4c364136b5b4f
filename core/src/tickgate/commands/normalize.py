"""``tickgate normalize``: engine-native files -> one neutral observations document.

One file gives its own document. Several files are merged into one run only
when every one of them has per-request observations (SSE captures of one
run, per-request exports split across files): requests are concatenated, a
request id seen twice is an error naming both files, and the run aggregates
are recomputed from the merged requests (each input's own aggregates are
dropped, with a note). Aggregate-only inputs (bench summaries, metrics
scrapes) are runs of their own: normalize them one at a time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..util.errors import InputError
from ..util.words import plural


def merge(docs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Merge per-request documents of one run (see the module docstring)."""
    from ..readers.aggregate import from_requests
    from ..readers.common import clean_aggregates, document

    owner: dict[str, str] = {}
    requests: list[dict[str, Any]] = []
    notes: list[str] = []
    for name, doc in docs:
        if not doc.get("requests"):
            raise InputError(
                name,
                "has run-level aggregates only; several files are merged only when each has "
                "per-request observations (normalize aggregate files one at a time)",
            )
        for req in doc["requests"]:
            rid = req["request_id"]
            if rid in owner:
                raise InputError(
                    name,
                    f"request {rid!r} is also in {owner[rid]}; merged files must hold different requests",
                )
            owner[rid] = name
            requests.append(req)
        if doc["run"].get("aggregates"):
            notes.append(f"{name}: aggregates recomputed from the merged requests")
    requests.sort(key=lambda r: r["request_id"])
    runs = [d["run"] for _, d in docs]
    formats = sorted({r.get("provenance", {}).get("format", "?") for r in runs})
    run: dict[str, Any] = {}
    for key in ("backend", "model", "accelerator", "scheduler"):
        values = {r.get(key) for r in runs}
        if len(values) == 1 and None not in values:
            run[key] = values.pop()
    run["provenance"] = {
        "format": formats[0] if len(formats) == 1 else "mixed",
        "file": ", ".join(name for name, _ in docs),
        "sources": [r.get("provenance", {}) for r in runs],
        "notes": sorted(set(notes)) or ["merged from several files"],
    }
    run["aggregates"] = clean_aggregates(from_requests(requests))
    return document(run, requests)


def dump(doc: dict[str, Any], fh: Any) -> None:
    """Indented envelope, one compact request per line: readable, diffable, and
    written by the C JSON encoder (an indented dump of 100k requests is slow)."""
    head = {k: v for k, v in doc.items() if k != "requests"}
    text = json.dumps(head, indent=2, ensure_ascii=False, allow_nan=False)
    if "requests" not in doc:
        fh.write(text + "\n")
        return
    fh.write(text[:-2] + ',\n  "requests": [')
    for i, req in enumerate(doc["requests"]):
        fh.write(
            ("\n    " if i == 0 else ",\n    ")
            + json.dumps(req, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
        )
    fh.write("\n  ]\n}\n" if doc["requests"] else "]\n}\n")


@click.command("normalize")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    metavar="auto|NAME",
    help="Force a format (names: `tickgate plugins`); auto-detects by default.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here (atomically); stdout when omitted.",
)
@click.option(
    "--evidence",
    "captures",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Token-stream capture (SSE) whose per-request streaming evidence is joined "
    "to the observations by request id. Repeatable.",
)
@click.option(
    "--evidence-format",
    default="auto",
    show_default=True,
    metavar="auto|NAME",
    help="Evidence parser for --evidence (names: `tickgate plugins`).",
)
def normalize_command(
    files: tuple[str, ...], fmt: str, output: Path | None, captures: tuple[Path, ...], evidence_format: str
) -> None:
    """Turn engine outputs (bench results, /metrics, SSE captures, KV events)
    into neutral observations. FILE#LINE picks one run of an appended JSONL."""
    from ..gate.detect import read_observations, split_selector
    from ..util.atomic import atomic_writer, check_distinct_outputs

    if output is not None:
        inputs: dict[str, Path | None] = {f"FILE ({name})": split_selector(name)[0] for name in files}
        inputs.update({f"--evidence ({path})": path for path in captures})
        check_distinct_outputs({"--output": output}, inputs)
    docs = [(name, read_observations(name, fmt)) for name in files]
    result = docs[0][1] if len(docs) == 1 else merge(docs)
    if captures:
        from ..readers.evidence import attach_evidence

        attach_evidence(result, list(captures), evidence_format)
    if output is None:
        dump(result, sys.stdout)
        return
    with atomic_writer(output) as fh:
        dump(result, fh)
    run = result["run"]
    count = len(result.get("requests", []))
    what = plural(count, "request") if count else "run-level aggregates only"
    click.echo(f"{output}: {run.get('provenance', {}).get('format', '?')}, {what}", err=True)
