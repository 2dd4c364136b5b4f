"""``tickgate report INPUT --html PAGE`` (docs/html.md) on real inputs: a timed replay of
the Azure code trace under the vLLM v1 bench preset, a real fleet replay (4 replicas, Mooncake trace),
a gate report of the bundled p95-regression fixture, and a small sweep of
fixtures/sweeps/vllm-azure.yaml (which also writes DIR/index.html).

The pages are checked as files (self-contained, no script, the same bytes every time),
bad inputs as one located error with nothing written, and -- where Debian's chromium is
installed (.ci/run installs it) -- in a real headless browser with the network cut off:
no console error, no request but the page itself, every chart drawn (its screenshot has
coloured data pixels), with a control page showing that those checks do catch a blocked
load and a console error.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from browser_helpers import bad_page as _bad, coloured, inked, needs_chromium, needs_extra, visit
from conftest import FIXTURES, POLICIES, run_cli

AZURE = FIXTURES / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"
#: charts each page draws (figure data-chart names)
CHARTS = {
    "replay": ["kv_pages_used", "queued", "active", "latency"],
    "fleet": ["fleet-requests", "fleet-busy", *(["kv_pages_used", "queued", "active"] * 4), "latency"],  # each replica
    "gate": ["gate-fraction", "gate-relative", "gate-absolute"],
    "sweep": ["pareto"],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("html-inputs")
    replay = tmp / "replay.json"
    res = run_cli("replay", "--input", str(AZURE), "--input-format", "azure", "--limit", "300", "--policy",
                  str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(replay), "--quiet")
    assert res.returncode == 0, res.stderr
    fleet = tmp / "fleet.json"  # a real fleet: 4 vllm-v1 replicas behind least-loaded on the Mooncake trace
    res = run_cli("replay", "--input", str(FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"),
                  "--input-format", "mooncake", "--limit", "120", "--policy",
                  str(POLICIES / "fleet-least-loaded.yaml"), "--output", str(fleet), "--quiet")
    assert res.returncode == 0, res.stderr
    gate = tmp / "gate.json"
    res = run_cli("gate", "--input", str(FIXTURES / "gate" / "p95_regression.json"), "--policy",
                  str(POLICIES / "gate-default.yaml"), "--output", str(gate), "--quiet")
    assert res.returncode == 10, res.stderr  # hold: the fixture's p95 regression
    sweep_file = tmp / "sweep.yaml"
    text = (FIXTURES / "sweeps" / "vllm-azure.yaml").read_text()
    text = text.replace("../../policies/", f"{POLICIES}/")
    text = text.replace("../realdata/", f"{FIXTURES / 'realdata'}/")
    sweep_file.write_text(text.replace("limit: 300", "limit: 60"))
    res = run_cli("sweep", str(sweep_file), "--output", str(tmp / "sweep"), "--jobs", "2", "--quiet")
    assert res.returncode == 0, res.stderr
    return {"replay": replay, "fleet": fleet, "gate": gate, "sweep": tmp / "sweep"}


@pytest.fixture(scope="module")
def pages(inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("html-pages")
    made = {}
    for kind, path in inputs.items():
        page = out / f"{kind}.html"
        res = run_cli("report", str(path), "--html", str(page))
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == f"{kind} report -> {page}"
        made[kind] = page
    return made


# -- the pages as files --------------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(CHARTS))
@needs_extra
def test_a_page_is_self_contained(kind: str, pages: dict[str, Path]) -> None:
    text = pages[kind].read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; " in text
    assert "<script" not in text.lower()
    assert re.search(r"\b(src|href)\s*=", text) is None  # nothing to load, nothing to follow
    assert re.search(r"url\(", text) is None  # no CSS-loaded resources either
    # the only URLs are XML namespace names (never fetched)
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {"http://www.w3.org/2000/svg",
                                                               "http://www.w3.org/1999/xlink"}
    assert re.findall(r'data-chart="([^"]+)"', text) == CHARTS[kind]
    assert text.count("<svg") == len(CHARTS[kind])


@needs_extra
def test_the_replay_page_says_what_the_report_says(inputs: dict[str, Path], pages: dict[str, Path]) -> None:
    report = json.loads(inputs["replay"].read_text())
    text = pages["replay"].read_text()
    assert report["summary"]["trace_fingerprint"] in text
    assert f"{report['series']['points']} buckets of {report['series']['bucket_steps']} step(s)" in text
    assert f"{report['latency']['ttft_ms']['p99']:,.3f}".rstrip("0").rstrip(".") in text


@needs_extra
def test_the_fleet_page_shows_every_replica(inputs: dict[str, Path], pages: dict[str, Path]) -> None:
    fleet = json.loads(inputs["fleet"].read_text())["fleet"]
    text = pages["fleet"].read_text()
    for replica in fleet["replicas"]:
        cells = (f"<td>{replica['name']}</td><td>{replica['pool']}</td>"
                 f"<td class=\"n\">{replica['routed']}</td>")
        assert cells in text
    jain, hit = fleet["routing"]["jain_index"], fleet["prefix_cache_hit_rate"]
    assert f"routing balance (Jain&#x27;s index) {jain:.3f}" in text and f"prefix-cache hit rate {hit:.1%}" in text
    for replica in fleet["replicas"]:
        assert f"Over time: {replica['name']}" in text  # each replica's own series
    assert "KV transfers (prefill to decode)" not in text  # a mixed fleet moves no KV
    assert "Fleet: per-replica load" not in pages["replay"].read_text()


@needs_extra
def test_the_gate_page_shows_the_decision_and_each_interval(inputs: dict[str, Path],
                                                            pages: dict[str, Path]) -> None:
    gate = json.loads(inputs["gate"].read_text())
    text = pages["gate"].read_text()
    assert '<span class="badge hold">hold</span>' in text
    for sig in gate["signals"]:
        assert f"<td>{sig['signal']}</td><td>{sig['status']}</td>" in text
        if sig.get("confidence_interval"):
            lo, hi = sig["confidence_interval"]
            assert f"{lo:.6g} .. {hi:.6g}" in text


@needs_extra
def test_the_sweep_writes_its_index_and_the_page_marks_the_front(inputs: dict[str, Path],
                                                                 pages: dict[str, Path]) -> None:
    index = inputs["sweep"] / "index.html"
    assert index.read_bytes() == pages["sweep"].read_bytes()  # what `tickgate report DIR` draws
    results = pages["sweep"].parent / "from-results.html"
    assert run_cli("report", str(inputs["sweep"] / "results.jsonl"), "--html", str(results)).returncode == 0
    assert results.read_bytes() == index.read_bytes()
    rows = [json.loads(line) for line in (inputs["sweep"] / "results.jsonl").read_text().splitlines()]
    on_front = re.findall(r"<tr><td>(p\d+)</td>(?:(?!</tr>).)*<td>yes</td><td>\u2013</td></tr>",
                          index.read_text())
    assert len(rows) == 9 and on_front
    best = max(r["metrics"]["output_tokens_per_s"] for r in rows)
    assert {r["id"] for r in rows if r["metrics"]["output_tokens_per_s"] == best} & set(on_front)


@needs_extra
def test_a_rollback_says_so(tmp_path: Path) -> None:
    gate, page = tmp_path / "g.json", tmp_path / "g.html"
    assert run_cli("gate", "--input", str(FIXTURES / "release_gate_bad.json"), "--output", str(gate),
                   "--quiet").returncode == 20
    assert run_cli("report", str(gate), "--html", str(page)).returncode == 0
    text = page.read_text()
    assert '<span class="badge rollback">rollback</span>' in text
    assert "<td>error-rate</td><td>rollback</td>" in text


def test_a_sweep_without_the_extra_still_finishes(tmp_path: Path) -> None:
    """No page, a line saying why, exit 0: the results do not depend on a picture of them."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"policy: {POLICIES / 'vllm-v1-bench.yaml'}\n"
                     f"workloads: [{{path: {AZURE}, format: azure, limit: 20}}]\n"
                     "grid: {scheduler.options.max_num_seqs: [16]}\n")
    out = tmp_path / "out"
    code = ("import sys; sys.modules['vl_convert'] = None; from tickgate.commands.cli import main; "
            f"sys.exit(main(['sweep', {str(sweep)!r}, '--output', {str(out)!r}]))")
    import subprocess

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.splitlines()[-1] == (f"{out / 'index.html'} not written: the page needs the 'html' "
                                           "extra (pip install 'tickgate[html]')")
    assert (out / "results.jsonl").exists() and not (out / "index.html").exists()


def test_pareto_front() -> None:
    from tickgate.html.views import pareto_front

    pts = [{"id": "a", "ttft": 1.0, "throughput": 10.0}, {"id": "b", "ttft": 2.0, "throughput": 20.0},
           {"id": "c", "ttft": 2.0, "throughput": 15.0}, {"id": "d", "ttft": 3.0, "throughput": 20.0},
           {"id": "e", "ttft": 1.0, "throughput": 10.0}]
    assert pareto_front(pts) == {"a", "b", "e"}  # c: b is as fast and better; d: b is better and as good


@needs_extra
def test_the_same_input_the_same_page(inputs: dict[str, Path], pages: dict[str, Path],
                                      tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    assert run_cli("report", str(inputs["fleet"]), "--html", str(again),
                   env={"PYTHONHASHSEED": "7"}).returncode == 0
    assert again.read_bytes() == pages["fleet"].read_bytes()


@needs_extra
def test_an_old_report_without_series_draws_its_step_records(inputs: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(inputs["replay"].read_text())
    del report["series"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(report))
    page = tmp_path / "old.html"
    assert run_cli("report", str(old), "--html", str(page), "--quiet").returncode == 0
    text = page.read_text()
    assert "has no series block" in text and f"the first {len(report['ticks'])} step records" in text
    assert re.findall(r'data-chart="([^"]+)"', text) == CHARTS["replay"]


# -- bad inputs: one located line, exit 2, nothing written ----------------------------------------

def test_bad_json_is_located(tmp_path: Path) -> None:
    line, path = _bad(tmp_path, "r.json", '{"summary": {\n  "request_count": 3,,\n}}')
    assert line.startswith(f"error: {path}:2:")
    assert "invalid JSON" in line


def test_a_document_of_another_kind(tmp_path: Path) -> None:
    line, path = _bad(tmp_path, "w.json", json.dumps({"kind": "tickgate.workload", "requests": []}))
    assert line == (f"error: {path}: $: not a report tickgate knows: expected a replay report "
                    "(with \"summary\"), a gate report (\"kind\": \"tickgate.gate-report\") or a sweep's "
                    "results.jsonl")
    line, path = _bad(tmp_path, "a.json", "[1, 2]")
    assert line == f"error: {path}: $: expected an object, not an array"


def test_a_replay_report_with_a_wrong_field(inputs: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(inputs["replay"].read_text())
    report["series"]["queued"]["max"][3] = "many"
    line, path = _bad(tmp_path, "r.json", json.dumps(report))
    assert line == f"error: {path}: $.series.queued.max[3]: expected a number, not a string"
    report = json.loads(inputs["replay"].read_text())
    del report["summary"]["trace_fingerprint"]
    line, path = _bad(tmp_path, "r.json", json.dumps(report))
    assert line == f"error: {path}: $.summary.trace_fingerprint: missing (expected a string)"


def test_a_fleet_block_with_a_wrong_field(inputs: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(inputs["fleet"].read_text())
    report["fleet"]["replicas"][1]["routed"] = 2.5
    line, path = _bad(tmp_path, "f.json", json.dumps(report))
    assert line == f"error: {path}: $.fleet.replicas[1].routed: expected an integer, not a number"


def test_a_gate_report_with_a_bad_interval(inputs: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads(inputs["gate"].read_text())
    report["signals"][2]["confidence_interval"] = [0.1]
    line, path = _bad(tmp_path, "g.json", json.dumps(report))
    assert line == f"error: {path}: $.signals[2].confidence_interval: expected [low, high] (two numbers)"


def test_a_bad_results_line_is_located(inputs: dict[str, Path], tmp_path: Path) -> None:
    lines = (inputs["sweep"] / "results.jsonl").read_text().splitlines()
    row = json.loads(lines[4])
    row["metrics"]["ttft_ms_p99"] = "slow"
    lines[4] = json.dumps(row)
    line, path = _bad(tmp_path, "results.jsonl", "\n".join(lines) + "\n")
    assert line == f"error: {path}:5: $.metrics.ttft_ms_p99: expected a number or null, not a string"
    lines[4] = "{not json"
    line, path = _bad(tmp_path, "results.jsonl", "\n".join(lines) + "\n")
    assert line.startswith(f"error: {path}:5:2: invalid JSON")


def test_missing_files_and_directories(tmp_path: Path) -> None:
    line, path = _bad(tmp_path, "nothing.json", None)
    assert line == f"error: {path}: no such file"
    (tmp_path / "d").mkdir()
    line, path = _bad(tmp_path, "d", None)
    assert line.startswith(f"error: {path}: a directory, but not a sweep's output: it has no results.jsonl")


def test_the_page_may_not_replace_its_input(inputs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "r.json"
    shutil.copy(inputs["gate"], copy)
    res = run_cli("report", str(copy), "--html", str(copy))
    assert res.returncode == 2 and "name the same file" in res.stderr
    assert copy.read_bytes() == inputs["gate"].read_bytes()


def test_without_the_extra_one_line_names_it(inputs: dict[str, Path], tmp_path: Path) -> None:
    """vl_convert made unimportable (a None entry in sys.modules) in a fresh interpreter."""
    page = tmp_path / "p.html"
    code = ("import sys; sys.modules['vl_convert'] = None; from tickgate.commands.cli import main; "
            f"sys.exit(main(['report', {str(inputs['replay'])!r}, '--html', {str(page)!r}]))")
    import subprocess

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: tickgate report --html needs the 'html' extra (vl-convert-python): "
                                  "pip install 'tickgate[html]'")
    assert not page.exists()


# -- in a real browser -----------------------------------------------------------------------------

@needs_chromium
@pytest.mark.parametrize("kind", sorted(CHARTS))
@needs_extra
def test_the_page_renders_in_chromium_offline(kind: str, pages: dict[str, Path]) -> None:
    seen = visit(pages[kind])
    assert seen.problems == []
    assert seen.requests == [seen.url] and seen.failed == {}  # the page itself, nothing else
    assert [c.name for c in seen.charts] == CHARTS[kind] and seen.svg_count == len(CHARTS[kind])
    for chart in seen.charts:
        assert chart.box["width"] > 300 and chart.box["height"] > 80, chart.name
        assert chart.share(inked) > 0.02, f"{chart.name}: blank"
        # data marks are coloured (three dots of a sweep: ~300 pixels)
        assert chart.count(coloured) >= 40, f"{chart.name}: axes but no data drawn"


@needs_chromium
def test_the_browser_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """Controls: under the pages' policy an external image and an inline script are
    refused and reported; without it the image request is seen (and fails: no network)."""
    from tickgate.html.page import CSP

    guarded = tmp_path / "guarded.html"
    guarded.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                       f'content="{CSP}"></head><body><img src="https://example.com/x.png">'
                       '<script>console.error("boom")</script></body></html>')
    seen = visit(guarded)
    assert any("Content Security Policy" in p for p in seen.problems), seen.problems
    assert not any("boom" in p for p in seen.problems)  # the script never ran
    assert seen.requests == [seen.url, "https://example.com/x.png"]  # asked for, and refused:
    assert seen.failed == {"https://example.com/x.png": "csp"}
    open_page = tmp_path / "open.html"
    open_page.write_text('<!DOCTYPE html><html><body><img src="http://tickgate.invalid/x.png">'
                         '<script>console.error("boom")</script></body></html>')
    seen = visit(open_page)
    assert seen.requests == [seen.url, "http://tickgate.invalid/x.png"]
    assert seen.failed["http://tickgate.invalid/x.png"].startswith("net::ERR_")  # no network to reach
    assert any("boom" in p for p in seen.problems)
