"""A point's line of ``results.jsonl``: its fingerprint and the headline numbers of its report."""

from __future__ import annotations

from typing import Any


def metrics(report: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of a replay report (latencies only when it was timed)."""
    summary = report["summary"]
    requests = report["requests"]
    out: dict[str, Any] = {
        "completed": requests["completed"],
        "rejected": requests["rejected"],
        "total_ticks": summary["total_ticks"],
    }
    latency = report.get("latency")
    if isinstance(latency, dict) and latency.get("ttft_ms"):
        for name, quantiles in (
            ("ttft_ms", ("p50", "p99")),
            ("itl_ms", ("p50", "p99")),
            ("e2e_ms", ("p99",)),
        ):
            block = latency.get(name) or {}
            for q in quantiles:
                if q in block:
                    out[f"{name}_{q}"] = block[q]
        # throughput over the client's window, as a benchmark client prints it (docs/report.md)
        for name in ("output_tokens_per_s", "requests_per_s"):
            if name in latency:
                out[name] = latency[name]
    return out


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """A point's fields of ``results.jsonl`` from its report."""
    return {"fingerprint": report["summary"]["trace_fingerprint"], "metrics": metrics(report)}
