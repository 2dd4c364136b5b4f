"""What KV events cost the vllm-v1 replay: nothing unless asked (issue 21, docs/vllm.md "KV events").

    python benchmarks/bench_kv_events.py [--base main] [--limit 3000] [--rounds 5]

Three variants of the same replay (the Mooncake conversation trace, ``fixtures/policies/vllm-v1-toy.yaml``),
each in a fresh process, interleaved round by round, timing ``replay()`` alone (imports and reading
the policy excluded; the requests are read into a list first):

* ``base``: the ``tickgate_vllm`` adapter as it was at ``--base`` (``git archive`` into a temporary
  directory put first on ``PYTHONPATH``; the core is this tree's, whose additions it never calls);
* ``off``: this tree, events not asked for (the plain pool and methods: the claim is base == off);
* ``on``: this tree with ``kv_events_path`` (recording pool, no decode group, the msgpack file).

Prints each run, the medians, the ratios off/base and on/off, and checks that all three give the
same fingerprint. A script, not a test: timings depend on the machine and its load.

    python benchmarks/bench_kv_events.py --instructions [--limit 200]

counts instructions instead (valgrind cachegrind, as ``bench_instructions.py``; wall time on a
shared VM varies by up to 2x): each variant replays ``--limit`` and 10 requests, the difference is
the replay of the rest, start-up and imports cancelled. ``PYTHONHASHSEED=0`` for every process.

    python benchmarks/bench_kv_events.py --read [--base main] [--limit 3000] [--small-limit 500] [--rounds 1]

writes and reads back a fleet's capture (issue 38): ``tickgate replay --kv-events`` of the Mooncake
conversation trace's first ``--limit`` requests under ``policies/fleet-prefix-aware.yaml`` (3,000:
270 MB), then ``tickgate normalize`` of it, each under ``/usr/bin/time -v`` (wall, user + system
CPU, peak RSS), by ``--base`` (the whole tree ``git archive``-d into a temporary directory) and by
this tree, alternating. The base refuses a capture above its 64 MiB whole-file limit: it is also
run with that limit lifted (``read_bytes`` without a limit), for its figures. Checks that both trees
write the same capture and report, and give the same normalized bytes, also for a capture of
``--small-limit`` requests, under the old limit, read by the base as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROGRAM = r"""
import json, sys, tempfile, time
from pathlib import Path
import tickgate_vllm
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests
trace, policy, limit, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "on"
requests, inputs = open_requests(Path(trace), "mooncake", block_size=None, limit=limit)
requests = list(requests)
pol = load_policy(Path(policy))
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    report = replay(requests, pol, inputs=inputs, kv_events_path=Path(tmp) / "e.msgpack" if events else None)
    wall = time.perf_counter() - t0
    size = (Path(tmp) / "e.msgpack").stat().st_size if events else 0
print(json.dumps({"wall_s": wall, "fingerprint": report["summary"]["trace_fingerprint"],
                  "adapter": tickgate_vllm.__file__, "bytes": size,
                  "batches": report.get("kv_events", {}).get("batches", 0)}))
"""

# the base adapter cannot be given kv_events_path (its scheduler has no capability): run it plain
PROGRAM_BASE = PROGRAM.replace("kv_events_path=Path(tmp) / \"e.msgpack\" if events else None", "")


def extract_base(commit: str, into: Path) -> Path:
    blob = subprocess.run(["git", "-C", str(REPO), "archive", commit, "adapters/vllm/src/tickgate_vllm"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into / "adapters/vllm/src"


def run(variant: str, args: argparse.Namespace, base_path: Path, limit: int | None = None,
        valgrind: Path | None = None) -> dict:
    env = dict(os.environ)
    program = PROGRAM
    if variant == "base":
        env["PYTHONPATH"] = str(base_path) + os.pathsep + env.get("PYTHONPATH", "")
        program = PROGRAM_BASE
    argv = [sys.executable, "-c", program, str(args.trace), str(args.policy), str(limit or args.limit),
            "on" if variant == "on" else "off"]
    if valgrind is not None:
        env["PYTHONHASHSEED"] = "0"
        env["TICKGATE_PARALLEL"] = "0"
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={valgrind}", *argv]
    out = subprocess.run(argv, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if valgrind is not None:
        match = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if match is None:
            raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
        result["instructions"] = int(match.group(1).replace(",", ""))
    expected = str(base_path) if variant == "base" else str(REPO / "adapters/vllm/src")
    if not result["adapter"].startswith(expected):
        raise SystemExit(f"{variant} imported {result['adapter']}, not the adapter under {expected}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="main", help="commit whose vllm adapter is the baseline")
    ap.add_argument("--trace", type=Path,
                    default=REPO / "fixtures/realdata/traces/mooncake_conversation_trace.jsonl")
    ap.add_argument("--policy", type=Path, default=REPO / "fixtures/policies/vllm-v1-toy.yaml")
    ap.add_argument("--limit", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="count instructions (valgrind), not time")
    ap.add_argument("--read", action="store_true", help="write and normalize a fleet's capture (issue 38)")
    ap.add_argument("--small-limit", type=int, default=500, help="--read: requests of the capture under 64 MiB")
    args = ap.parse_args(argv)
    if args.instructions:
        return count_instructions(args)
    if args.read:
        if "--rounds" not in (argv if argv is not None else sys.argv):
            args.rounds = 1
        return read_back(args)
    walls: dict[str, list[float]] = {"base": [], "off": [], "on": []}
    prints = set()
    with tempfile.TemporaryDirectory() as tmp:
        base_path = extract_base(args.base, Path(tmp))
        for n in range(args.rounds):
            for variant in walls:
                r = run(variant, args, base_path)
                walls[variant].append(r["wall_s"])
                prints.add(r["fingerprint"])
                extra = f"  {r['batches']} batches, {r['bytes'] / 1e6:.1f} MB" if variant == "on" else ""
                print(f"round {n + 1} {variant:>4}: {r['wall_s']:7.3f} s{extra}", flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"median base {med['base']:.3f} s, off {med['off']:.3f} s, on {med['on']:.3f} s; "
          f"off/base {med['off'] / med['base']:.3f}, on/off {med['on'] / med['off']:.3f}; "
          f"load average {os.getloadavg()[0]:.2f}")
    if len(prints) != 1:
        print(f"fingerprints differ: {sorted(prints)}", file=sys.stderr)
        return 1
    return 0


def count_instructions(args: argparse.Namespace) -> int:
    counts: dict[str, int] = {}
    prints = set()
    with tempfile.TemporaryDirectory() as tmp:
        base_path = extract_base(args.base, Path(tmp))
        for variant in ("base", "off", "on"):
            small = run(variant, args, base_path, 10, Path(tmp) / "small.out")["instructions"]
            big = run(variant, args, base_path, args.limit, Path(tmp) / "big.out")
            prints.add(big["fingerprint"])
            counts[variant] = big["instructions"] - small
            print(f"{variant:>4}: {counts[variant] / 1e9:.4f} G instructions for requests 11..{args.limit}",
                  flush=True)
    print(f"off/base {counts['off'] / counts['base']:.4f}, on/off {counts['on'] / counts['off']:.3f}")
    if len(prints) != 1:
        print(f"fingerprints differ: {sorted(prints)}", file=sys.stderr)
        return 1
    return 0


FLEET_POLICY = REPO / "policies/fleet-prefix-aware.yaml"
# the base's normalize with its whole-file limit lifted (its mirrors read through kvmirror.read_bytes)
UNLIMITED = r"""
import sys
from tickgate.readers import common, kvmirror
kvmirror.read_bytes = lambda path: common.read_bytes(path, limit=1 << 40)
from tickgate.commands.cli import main
sys.exit(main(sys.argv[1:]))
"""


def tree_env(root: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join(str(root / p) for p in (
        "core/src", "adapters/vllm/src", "adapters/sglang/src", "adapters/trtllm/src"))
    return env


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> dict:
    """``argv`` under ``/usr/bin/time -v``: exit code, wall and CPU seconds, peak RSS (MB), stderr."""
    out = subprocess.run(["/usr/bin/time", "-v", *argv], env=env, cwd=cwd, capture_output=True, text=True)
    fields = dict(line.strip().rsplit(": ", 1) for line in out.stderr.splitlines()
                  if line.startswith("\t") and ": " in line)
    h, m, sec = ["0", *fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")][-3:]
    return {"code": out.returncode, "wall_s": int(h) * 3600 + int(m) * 60 + float(sec),
            "cpu_s": float(fields["User time (seconds)"]) + float(fields["System time (seconds)"]),
            "rss_mb": int(fields["Maximum resident set size (kbytes)"]) / 1024,
            "stderr": "\n".join(line for line in out.stderr.split("\tCommand being timed")[0].splitlines()
                                if not line.startswith("Command exited with"))}


def digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def read_back(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base = tmp / "base"
        base.mkdir()
        blob = subprocess.run(["git", "-C", str(REPO), "archive", args.base], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=BytesIO(blob)) as tar:
            tar.extractall(base, filter="data")
        trees = {"base": base, "this": REPO}
        print(f"load average before: {os.getloadavg()[0]:.2f}; capture: {args.limit} requests, "
              f"{FLEET_POLICY.relative_to(REPO)}", flush=True)
        same = True
        for limit in (args.small_limit, args.limit):
            files: dict[str, list[str]] = {}
            figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in trees}
            for n in range(args.rounds):
                for name, root in trees.items():
                    env = tree_env(root)
                    # one set of names for both trees: the report and the observations name them
                    capture, report, obs = (tmp / f"{limit}{ext}" for ext in (".msgpack", ".json", ".obs.json"))
                    # each tree's own trace and policy, named relative to it (the report names both)
                    trace, policy = (p.relative_to(REPO) if p.is_relative_to(REPO) else p
                                     for p in (args.trace.resolve(), FLEET_POLICY))
                    replay = timed([sys.executable, "-m", "tickgate", "replay", "--input", str(trace),
                                    "--input-format", "mooncake", "--policy", str(policy), "--limit",
                                    str(limit), "--output", str(report), "--kv-events", str(capture), "--quiet"],
                                   env, root)
                    if replay["code"]:
                        raise SystemExit(f"{name} replay failed: {replay['stderr']}")
                    size = capture.stat().st_size
                    shown = str(capture)
                    norm = timed([sys.executable, "-m", "tickgate", "normalize", shown, "-o", str(obs)], env, root)
                    line = (f"round {n + 1} {name:>4} {limit} requests: replay {replay['wall_s']:.2f} s wall, "
                            f"{replay['cpu_s']:.2f} s CPU, {replay['rss_mb']:.0f} MB; capture {size / 1e6:.1f} MB; "
                            f"normalize ")
                    if norm["code"] and "the limit for this kind of file" in norm["stderr"]:
                        line += f"refused ({norm['stderr'].splitlines()[-1].split(': ', 2)[-1]}); limit lifted: "
                        norm = timed([sys.executable, "-c", UNLIMITED, "normalize", shown, "-o", str(obs)], env, root)
                    if norm["code"]:
                        raise SystemExit(f"{name} normalize failed: {norm['stderr']}")
                    print(line + f"{norm['wall_s']:.2f} s wall, {norm['cpu_s']:.2f} s CPU, "
                          f"{norm['rss_mb']:.0f} MB peak RSS", flush=True)
                    figures[name].append((replay["wall_s"], replay["cpu_s"], norm["wall_s"], norm["cpu_s"],
                                          norm["rss_mb"]))
                    files.setdefault(name, [digest(capture), digest(report), digest(obs)])
                    for path in (capture, report, obs):
                        path.unlink()
            for name, rows in figures.items():
                med = [statistics.median(col) for col in zip(*rows)]
                print(f"median {name:>4} {limit} requests: replay {med[0]:.2f} s wall, {med[1]:.2f} s CPU; "
                      f"normalize {med[2]:.2f} s wall, {med[3]:.2f} s CPU, {med[4]:.0f} MB peak RSS", flush=True)
            for what, a, b in zip(("capture", "report", "observations"), files["base"], files["this"]):
                if a != b:
                    print(f"{limit} requests: the {what} differs between the trees", file=sys.stderr)
                    same = False
        print(f"load average after: {os.getloadavg()[0]:.2f}; outputs "
              + ("byte-identical" if same else "DIFFER"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
