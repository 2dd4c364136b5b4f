"""``tickgate report --html`` of an autoscaled fleet replay (docs/html.md): the
``autoscaling`` section (one chart on one time axis: arrival rate, each pool's
replicas by state with the desired count, p99 TTFT and ITL; the facts; the
events) and the ``cost`` table, from a real replay made here: a disaggregated
fleet (prefill and decode pools) under the ``hpa`` autoscaler on a 60 s ramp
(2, 24, then 2 requests/s), which starts decode replicas, then drains them.

Checked as files (sections present, absent for a static fleet, the same bytes
twice), bad fields as one located error with nothing written, and in headless
Chromium with the network cut off (tests/browser_helpers.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, IN_CI, bad_page as _bad, coloured, inked, needs_chromium, needs_extra, visit

from conftest import run_cli

_POLICY = """\
version: 1
scheduler:
  name: vllm-v1
  options: {{block_size: 16, num_gpu_blocks: auto, max_num_seqs: 256, max_num_batched_tokens: 8192,
             enable_chunked_prefill: true, enable_prefix_caching: true, policy: fcfs}}
timing:
  name: roofline
  options: {{model: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM-80GB, tensor_parallel_size: 1, engine: vllm}}
cluster:
  router: {{name: least-loaded}}
  pools:
    prefill: {{role: prefill, replicas: 1}}
    decode: {{role: decode, replicas: 1}}
  transfer: {{bandwidth_gb_s: 50, latency_ms: 0.1}}
{scaling}"""
_SCALING = """\
  autoscaler:
    name: hpa
    max_replicas: 4
    interval_s: 5
    window_s: 10
    options: {metrics: [{name: running, target: 4}], scale_down: {stabilization_window_s: 5}}
  lifecycle: {provisioning_s: 4, load_s: 2, warmup_s: 1}
"""


def _ramp() -> dict[str, Any]:
    """60 s: 2 requests/s, then 24, then 2 again; prompts 800..1199, outputs 80..139 tokens."""
    requests, i = [], 0
    for start, rate in ((0, 2), (20, 24), (40, 2)):
        for k in range(20 * rate):
            requests.append({"id": f"r{i}", "prompt_tokens": 800 + (i * 37) % 400,
                             "max_output_tokens": 80 + (i * 13) % 60,
                             "arrival_ms": round(1000.0 * (start + k / rate), 3)})
            i += 1
    return {"version": 1, "description": "a 60 s ramp", "requests": requests}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("html-autoscaling")
    workload = tmp / "ramp.json"
    workload.write_text(json.dumps(_ramp()))
    out = {}
    for name, scaling in (("scaled", _SCALING), ("static", "")):
        policy, report, page = tmp / f"{name}.yaml", tmp / f"{name}.json", tmp / f"{name}.html"
        policy.write_text(_POLICY.format(scaling=scaling))
        res = run_cli("replay", "--policy", str(policy), "--input", str(workload), "--output", str(report),
                      "--quiet")
        assert res.returncode == 0, res.stderr
        out[name] = report
        if _extra():
            assert run_cli("report", str(report), "--html", str(page)).returncode == 0
            out[f"{name}-page"] = page
    return out


def _extra() -> bool:
    from tickgate.html.charts import available

    return available() or IN_CI


def _charts(text: str) -> list[str]:
    return re.findall(r'data-chart="([^"]+)"', text)


def _num(value: float) -> str:
    """A number as the page's tables write it (tickgate.html.page.fmt)."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}".rstrip("0").rstrip(".")


# -- the pages as files --------------------------------------------------------------------------

@needs_extra
def test_the_replay_scaled_and_the_page_shows_it(made: dict[str, Path]) -> None:
    scaling = json.loads(made["scaled"].read_text())["autoscaling"]
    actions = {e["action"] for e in scaling["events"]}
    assert {"start", "ready", "drain", "stop"} <= actions, actions  # the fixture exercises each state
    text = made["scaled-page"].read_text()
    sections = re.findall(r"<section><h2>([^<]+)</h2>", text)
    assert sections[:2] == ["Summary", "Autoscaling"] and "Cost" not in sections
    charts = _charts(text)
    assert charts[0] == "autoscaling" and charts.count("autoscaling") == 1
    assert text.count("<svg") == len(charts)
    figure = text.split('data-chart="autoscaling">', 1)[1].split("</figure>", 1)[0]
    for title in ("Arrival rate", "Replicas: prefill", "Replicas: decode", "TTFT p99", "ITL p99", "time (s)"):
        assert f">{title}</text>" in figure, title
    assert figure.count(">time (s)</text>") == 1  # one time axis, titled once, under the last panel
    for e in scaling["events"]:  # few enough: every one, in order
        assert (f'<td class="n">{_num(e["t_s"])}</td><td>{e["pool"]}</td><td>{e["replica"]}</td>'
                f'<td>{e["action"]}</td><td>{e["reason"]}</td>') in text
    assert f"Scaling events ({len(scaling['events'])})" in text and "more events" not in text
    assert '<tr><td>start-up in all (s)</td><td class="n">7</td></tr>' in text  # 4 + 2 + 1
    assert "<tr><td>replicas min..max (decode)</td><td>1..4</td></tr>" in text
    peak = scaling["peak_replicas"]["decode"]
    assert f'<tr><td>peak replicas up (decode)</td><td class="n">{peak}</td></tr>' in text
    for life in scaling["replicas"]:
        assert f"<tr><td>{life['replica']}</td><td>{life['pool']}</td>" in text


@needs_extra
def test_a_static_fleet_has_no_autoscaling_section(made: dict[str, Path]) -> None:
    assert "autoscaling" not in json.loads(made["static"].read_text())
    text = made["static-page"].read_text()
    assert "<h2>Autoscaling</h2>" not in text and "autoscaling" not in _charts(text)
    assert "<h2>Cost</h2>" not in text and "Fleet: per-replica load" in text


@needs_extra
def test_the_same_report_the_same_page(made: dict[str, Path], tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    assert run_cli("report", str(made["scaled"]), "--html", str(again),
                   env={"PYTHONHASHSEED": "11"}).returncode == 0
    assert again.read_bytes() == made["scaled-page"].read_bytes()


@needs_extra
def test_a_long_event_list_shows_its_ends_and_counts_the_rest(made: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(made["scaled"].read_text())
    events = [{**e, "replica": f"r{k}"} for k, e in enumerate(report["autoscaling"]["events"] * 10)]
    report["autoscaling"]["events"] = events  # 120 events, each named apart
    source, page = tmp_path / "long.json", tmp_path / "long.html"
    source.write_text(json.dumps(report))
    assert run_cli("report", str(source), "--html", str(page)).returncode == 0
    text = page.read_text()
    assert f"Scaling events ({len(events)})" in text
    assert f"{len(events) - 50} more events" in text and f"the first and last 25 of {len(events)}" in text
    shown = [e["replica"] for e in events[:25] + events[-25:]]
    hidden = [e["replica"] for e in events[25:-25]]
    rows = re.findall(r"<tr><td class=\"n\">[^<]*</td><td>[^<]*</td><td>([^<]*)</td><td>", text)
    assert rows == shown and not set(hidden) & set(rows)


#: a cost block as tickgate.cost.report.cost_section writes it (a priced autoscaled fleet)
COST = {
    "priced": True, "gpu_hours": 0.05, "usd": 0.2, "usd_per_million_output_tokens": 3.25,
    "usd_per_million_total_tokens": 0.5, "output_tokens": 61538, "total_tokens": 400000, "currency": "USD",
    "usd_per_gpu_hour": {"H100-SXM-80GB": 4.0},
    "prices": {"origin": "prices.yaml", "currency": "USD", "date": "2025-01-01", "sources": ["a", "b"]},
    "pools": {"decode": {"replicas": 4, "gpu": ["H100-SXM-80GB"], "gpu_hours": 0.03, "usd": 0.12},
              "prefill": {"replicas": 1, "gpu": ["H100-SXM-80GB"], "gpu_hours": 0.02, "usd": 0.08}},
    "rounding": "to 6 decimal places",
}


@needs_extra
def test_the_cost_block_is_a_table(made: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(made["scaled"].read_text())
    report["cost"] = COST
    source, page = tmp_path / "cost.json", tmp_path / "cost.html"
    source.write_text(json.dumps(report))
    assert run_cli("report", str(source), "--html", str(page)).returncode == 0
    text = page.read_text()
    assert re.findall(r"<section><h2>([^<]+)</h2>", text)[:3] == ["Summary", "Autoscaling", "Cost"]
    # the known figures first, then the other numbers by name, then a pool's text
    assert ("<th>of</th><th>gpu hours</th><th>usd</th><th>usd per million output tokens</th>"
            "<th>usd per million total tokens</th><th>output tokens</th><th>replicas</th>"
            "<th>total tokens</th><th>gpu</th>") in text
    assert ('<tr><td>all pools</td><td class="n">0.05</td><td class="n">0.2</td><td class="n">3.25</td>'
            '<td class="n">0.5</td><td class="n">61,538</td><td>\u2013</td><td class="n">400,000</td>'
            "<td>\u2013</td></tr>") in text
    assert ('<tr><td>pool prefill</td><td class="n">0.02</td><td class="n">0.08</td><td>\u2013</td>'
            '<td>\u2013</td><td>\u2013</td><td class="n">1</td><td>\u2013</td><td>H100-SXM-80GB</td></tr>') in text
    for note in ("priced: yes", "currency: USD", "usd per gpu hour: H100-SXM-80GB 4.0",
                 "prices: origin prices.yaml, currency USD, date 2025-01-01, sources a, b",
                 "rounding: to 6 decimal places"):
        assert f'<p class="note">{note}</p>' in text, note


def test_replica_bands_count_each_state_from_the_lifecycles() -> None:
    from tickgate.html.autoscaling import _bands

    lives = [
        {"start_s": 0.0, "ready_s": 0.0, "drain_s": None, "stop_s": 60.0},  # up throughout
        {"start_s": 10.0, "ready_s": 17.0, "drain_s": 40.0, "stop_s": 42.5},  # started, served, drained
        {"start_s": 20.0, "ready_s": None, "drain_s": None, "stop_s": 25.0},  # cancelled while starting
    ]
    rows = _bands(lives, 60.0)
    at = {(r["t"], r["state"]): r["n"] for r in rows}
    assert sorted({r["t"] for r in rows}) == [0.0, 10.0, 17.0, 20.0, 25.0, 40.0, 42.5, 60.0]
    expected = {0.0: (1, 0, 0), 10.0: (1, 1, 0), 17.0: (2, 0, 0), 20.0: (2, 1, 0), 25.0: (2, 0, 0),
                40.0: (1, 0, 1), 42.5: (1, 0, 0), 60.0: (0, 0, 0)}
    for t, (ready, starting, draining) in expected.items():
        assert (at[t, "ready"], at[t, "starting"], at[t, "draining"]) == (ready, starting, draining), t


# -- bad inputs: one located line, exit 2, nothing written ----------------------------------------

def test_a_bad_timeline_time_is_located(made: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(made["scaled"].read_text())
    report["autoscaling"]["timeline"][0]["t_s"] = "0s"
    line, path = _bad(tmp_path, "t.json", json.dumps(report))
    assert line == f"error: {path}: $.autoscaling.timeline[0].t_s: expected a number, not a string"


@pytest.mark.parametrize(("edit", "where", "expected"), [
    (lambda a: a["events"][1].pop("action"), "$.autoscaling.events[1].action", "missing (expected a string)"),
    (lambda a: a["replicas"][0].update(ready_s="soon"), "$.autoscaling.replicas[0].ready_s",
     "expected a number or null, not a string"),
    (lambda a: a["timeline"][2].update(desired=2.5), "$.autoscaling.timeline[2].desired",
     "expected an integer, not a number"),
    (lambda a: a["bounds"]["decode"].update(max_replicas=None), "$.autoscaling.bounds.decode.max_replicas",
     "expected an integer, not null"),
    (lambda a: a["lifecycle"].pop("warmup_s"), "$.autoscaling.lifecycle.warmup_s",
     "missing (expected a number)"),
    (lambda a: a.update(timeline={}), "$.autoscaling.timeline", "expected an array, not an object"),
])
def test_a_bad_autoscaling_field_is_located(made: dict[str, Path], tmp_path: Path, edit: Any, where: str,
                                            expected: str) -> None:
    report = json.loads(made["scaled"].read_text())
    edit(report["autoscaling"])
    line, path = _bad(tmp_path, "a.json", json.dumps(report))
    assert line == f"error: {path}: {where}: {expected}"


def test_a_bad_cost_figure_is_located(made: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(made["static"].read_text())
    report["cost"] = {"usd": 1.0, "pools": {"decode": {"gpu_hours": "two"}}}
    line, path = _bad(tmp_path, "c.json", json.dumps(report))
    assert line == f"error: {path}: $.cost.pools.decode.gpu_hours: expected a number or null, not a string"


# -- in a real browser -----------------------------------------------------------------------------

def _orange(p: tuple[int, int, int]) -> bool:
    """The starting band's colour (#f28e2b), drawn at 0.85 opacity on white."""
    return abs(p[0] - 243) < 14 and abs(p[1] - 152) < 20 and abs(p[2] - 72) < 26


@needs_chromium
@needs_extra
def test_the_autoscaling_page_renders_in_chromium_offline(made: dict[str, Path]) -> None:
    assert CHROMIUM is not None or IN_CI
    seen = visit(made["scaled-page"])
    assert seen.problems == []
    assert seen.requests == [seen.url] and seen.failed == {}
    assert [c.name for c in seen.charts] == _charts(made["scaled-page"].read_text())
    scaled = seen.charts[0]
    assert scaled.name == "autoscaling"
    assert scaled.box["width"] > 600 and scaled.box["height"] > 5 * 120  # five panels, one above the other
    assert scaled.share(inked) > 0.02 and scaled.count(coloured) >= 200
    assert scaled.count(_orange) >= 100, "no starting replicas drawn"
