"""PLAN.json and the table ``tickgate plan`` prints (docs/plan.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..util.atomic import atomic_writer
from .search import Question


def document(
    question: Question, policy: str, recommendation: dict[str, Any] | None, evidence: list[dict[str, Any]]
) -> dict[str, Any]:
    w = question.workload
    data: dict[str, Any] = {
        "version": 1,
        "question": {
            "policy": policy,
            "workload": {"path": w.label, "format": w.format, "block_size": w.block_size, "limit": w.limit},
            "slos": {slo.name: slo.limit for slo in question.slos},
            "goodput": question.goodput,
            "vary": {v.path: v.as_json() for v in question.varies},
            "cost": question.cost,
        },
        "recommendation": recommendation,
        "evidence": evidence,
    }
    if question.prices is not None:
        data["question"]["prices"] = question.prices.describe()
    return data


def write_plan(path: Path, data: Mapping[str, Any]) -> None:
    """Atomically: a plan that stopped half-way leaves no file (and never half of one)."""
    with atomic_writer(path) as fh:
        fh.write(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def table(question: Question, evidence: Sequence[dict[str, Any]]) -> str:
    """One line per run: the values, GPUs (and dollars per hour, with prices), each SLO's figure
    against its limit, met."""
    names = [v.path for v in question.varies]
    short = [n.rsplit(".", 1)[-1] for n in names]
    if len(set(short)) < len(short):
        short = names
    slo_names = [s.name for s in question.slos] + (["goodput"] if question.goodput is not None else [])
    priced = question.prices is not None
    header = ["run", *short, "gpus", *(["$/h"] if priced else []), *slo_names, "met"]
    lines = [header]
    for entry in evidence:
        row = [str(entry["run"]), *(_text(entry["values"][n]) for n in names), str(entry["cost"]["gpus"])]
        if priced:
            row.append(f"{entry['cost']['usd_per_hour']:.2f}")
        if "error" in entry:
            row += ["-"] * len(slo_names) + ["error"]
        else:
            for name in slo_names:
                f = entry["slos"][name]
                measured = "-" if f["measured"] is None else _text(f["measured"])
                row.append(
                    f"{measured} {'<=' if name != 'goodput' else '>='} {_text(f['limit'])}"
                    f"{'' if f['met'] else ' !'}"
                )
            rejected = entry["rejected"]
            row.append("yes" if entry["met"] else (f"no ({rejected} rejected)" if rejected else "no"))
        lines.append(row)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def summary(recommendation: dict[str, Any], evidence: Sequence[dict[str, Any]], output: Path) -> str:
    runs = f"{len(evidence)} run{'s' if len(evidence) != 1 else ''}"
    values = " ".join(f"{k}={_text(v)}" for k, v in recommendation["values"].items())
    n = recommendation["cost"]["gpus"]
    usd = recommendation["cost"].get("usd_per_hour")
    dollars = f", ${usd:.2f}/h" if usd is not None else ""
    return (
        f"recommendation: {values} ({n} GPU{'s' if n != 1 else ''}{dollars}, run {recommendation['run']}; "
        f"{runs}) -> {output}"
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
