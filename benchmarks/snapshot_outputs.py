"""Write every output tickgate produces from the bundled fixtures into one folder.

    python benchmarks/snapshot_outputs.py /tmp/out-before
    ... change the code ...
    python benchmarks/snapshot_outputs.py /tmp/out-after && diff -r /tmp/out-before /tmp/out-after

Each case is one CLI run; its output files, stdout, stderr and exit code are kept
(``<case>.rc``, ``.out``, ``.err``, then the files). Covered: replays of
fixtures/*.json, scenarios and admission workloads under every non-gate policy
(report and --trace), a generated Mooncake-like workload imported and replayed
in one process and with the helper processes forced on, every importer on every
real trace, a gate of each gate bundle and of the benchmark-client pairs,
normalize of each real-data sample (KV events included) and of the invalid
corpus. ``--quick`` skips the policy x workload product beyond the default
policy (a first look).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKGATE = [str(Path(sys.executable).with_name("tickgate"))]


#: fixed, so that messages naming the files are the same whatever the output folder
WORK = Path("/tmp/tickgate-snapshot-work")


def run(out: Path, case: str, args: list[str], files: list[str], env: dict[str, str] | None = None) -> None:
    work = WORK
    work.mkdir(parents=True, exist_ok=True)
    for name in files:
        (work / name).unlink(missing_ok=True)
    full_env = {**os.environ, "PYTHONHASHSEED": "0", **(env or {})}
    proc = subprocess.run([*TICKGATE, *args], cwd=ROOT, capture_output=True, env=full_env)
    (out / f"{case}.rc").write_text(f"{proc.returncode}\n")
    (out / f"{case}.out").write_bytes(proc.stdout)
    (out / f"{case}.err").write_bytes(proc.stderr)
    for name in files:
        src = work / name
        if src.exists():
            (out / f"{case}.{name}").write_bytes(src.read_bytes())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    out: Path = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = WORK
    work.mkdir(parents=True, exist_ok=True)
    w = str(work)

    # -- replays -------------------------------------------------------------
    workloads = [ROOT / "fixtures/workload.json", ROOT / "fixtures/replay-reports/workload.json",
                 *sorted((ROOT / "fixtures/scenarios").glob("*.json")),
                 *sorted((ROOT / "fixtures/admission").glob("*.json"))]
    policies = sorted(p for p in (ROOT / "policies").glob("*.yaml") if not p.name.startswith("gate-"))
    if a.quick:
        policies = [ROOT / "policies/default.yaml"]
    for wl in workloads:
        for pol in policies:
            case = f"replay-{wl.parent.name}-{wl.stem}-{pol.stem}"
            run(out, case, ["replay", "--input", str(wl.relative_to(ROOT)), "--policy", str(pol.relative_to(ROOT)),
                            "--output", f"{w}/r.json", "--trace", f"{w}/t.jsonl", "--quiet"], ["r.json", "t.jsonl"])
    # a Mooncake-like generated trace: import, then replay in one process and with helpers
    gen = work / "gen.jsonl"
    subprocess.run([sys.executable, str(ROOT / "benchmarks/gen_mooncake.py"), "--n", "3000", "--seed", "1",
                    "--out", str(gen)], check=True)
    run(out, "import-gen", ["import", "mooncake", str(gen), "--block-size", "16", "--output", f"{w}/gen-w.json",
                            "--quiet"], ["gen-w.json"])
    run(out, "import-gen-par", ["import", "mooncake", str(gen), "--block-size", "16", "--output",
                                f"{w}/gen-w.json", "--quiet"], ["gen-w.json"], {"TICKGATE_PARALLEL": "1"})
    gen_w = out / "import-gen.gen-w.json"
    (work / "genw.json").write_bytes(gen_w.read_bytes())
    bench_policies = ["benchmarks/policies/seed-bench.yaml", "policies/vllm-v1-bench.yaml",
                      "policies/sglang-default.yaml", "policies/trtllm-max-utilization.yaml"]
    for pol in bench_policies:
        for par in ("0", "1"):
            run(out, f"replay-gen-{Path(pol).stem}-par{par}",
                ["replay", "--input", f"{w}/genw.json", "--policy", pol, "--output", f"{w}/r.json",
                 "--trace", f"{w}/t.jsonl", "--quiet", "--detail-limit", "500"], ["r.json", "t.jsonl"],
                {"TICKGATE_PARALLEL": par})
    # a replay straight from a trace format
    run(out, "replay-trace-mooncake", ["replay", "--input", "fixtures/realdata/traces/mooncake_conversation_trace.jsonl",
                                       "--input-format", "mooncake", "--block-size", "16", "--output", f"{w}/r.json",
                                       "--quiet"], ["r.json"])

    # -- imports -------------------------------------------------------------
    traces = [*sorted((ROOT / "fixtures/realdata/traces").glob("*.[jc]s*")), *sorted((ROOT / "fixtures/traces").glob("*.csv"))]
    for tr in traces:
        for fmt in ("mooncake", "azure", "burstgpt", "splitwise"):
            for par in ("0", "1"):
                run(out, f"import-{tr.stem}-{fmt}-par{par}", ["import", fmt, str(tr.relative_to(ROOT)), "--output",
                                                             f"{w}/w.json", "--quiet"], ["w.json"],
                    {"TICKGATE_PARALLEL": par})

    # -- gates -----------------------------------------------------------------
    import json
    expected = json.loads((ROOT / "fixtures/gate/expected.json").read_text())
    for rel, info in sorted(expected.items()):
        run(out, f"gate-{Path(rel).stem}", ["gate", "--input", f"fixtures/{rel}", "--policy",
                                            f"policies/{info['policy']}", "--output", f"{w}/g.json", "--quiet"],
            ["g.json"])
    for bundle in ("release_gate_bad.json", "release_gate_safe.json"):
        run(out, f"gate-{bundle}", ["gate", "--input", f"fixtures/{bundle}", "--output", f"{w}/g.json"], ["g.json"])
    clients = ROOT / "fixtures/realdata/clients"
    pairs = []
    for d in sorted(p for p in clients.iterdir() if p.is_dir()):
        items = sorted(d.iterdir())
        base = [p for p in items if "baseline" in p.name]
        cand = [p for p in items if "candidate" in p.name]
        for b in base:
            pairs.append((b, cand[0] if cand else b))
    for b, c in pairs:
        for pol in ("gate-default.yaml", "gate-streaming.yaml"):
            for par in ("0", "1"):
                run(out, f"gate-client-{b.name}-{c.name}-{pol}-par{par}",
                    ["gate", "--baseline", str(b.relative_to(ROOT)), "--candidate", str(c.relative_to(ROOT)),
                     "--policy", f"policies/{pol}", "--output", f"{w}/g.json"], ["g.json"],
                    {"TICKGATE_PARALLEL": par})
    # a larger generated gate input (the fast paths and the reader child)
    _gate_inputs(work)
    for par in ("0", "1"):
        run(out, f"gate-gen-par{par}", ["gate", "--baseline", f"{w}/gb.json", "--candidate", f"{w}/gc.json",
                                        "--output", f"{w}/g.json"], ["g.json"], {"TICKGATE_PARALLEL": par})

    # -- normalize (real data, KV events, the invalid corpus) --------------------
    samples = sorted(p for p in (ROOT / "fixtures/realdata").rglob("*")
                     if p.is_file() and p.name != "SOURCES.txt" and "clients" not in p.parts)
    samples += sorted(p for p in clients.rglob("*") if p.is_file() and p.name != "SOURCES.txt")
    for s in samples:
        case = "normalize-" + "-".join(s.relative_to(ROOT / "fixtures").parts)
        run(out, case, ["normalize", str(s.relative_to(ROOT)), "-o", f"{w}/n.json"], ["n.json"])
    for s in sorted((ROOT / "fixtures/invalid").rglob("*")):
        if not s.is_file() or s.suffix in (".expected", ".md"):
            continue
        case = "invalid-" + "-".join(s.relative_to(ROOT / "fixtures/invalid").parts)
        kind = s.relative_to(ROOT / "fixtures/invalid").parts[0]
        if kind == "workload":
            args = ["replay", "--input", str(s.relative_to(ROOT)), "--output", f"{w}/r.json"]
        elif kind == "gate-bundle":
            args = ["gate", "--input", str(s.relative_to(ROOT)), "--output", f"{w}/g.json"]
        elif kind == "policy":
            args = ["validate", str(s.relative_to(ROOT))]
        elif kind == "traces":
            args = ["import", s.stem.split("_")[0] if s.stem.split("_")[0] in ("mooncake", "azure", "burstgpt", "splitwise")
                    else "mooncake", str(s.relative_to(ROOT)), "--output", f"{w}/w.json"]
        else:
            args = ["normalize", str(s.relative_to(ROOT)), "-o", f"{w}/n.json"]
        run(out, case, args, ["r.json", "g.json", "w.json", "n.json"])
    for p in work.iterdir():
        p.unlink()
    work.rmdir()


def _gate_inputs(work: Path) -> None:
    """Two neutral observation files of 3,000 paired requests (bench_gate.py's generator)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_gate import write_side

    write_side(work / "gb.json", 3000, 1, 0.0)
    write_side(work / "gc.json", 3000, 2, 1.04)


if __name__ == "__main__":
    main()
