#!/usr/bin/env bash
# The third-party path in a fresh virtual environment: install the core, the three
# adapters and examples/tickgate-example-adapter (non-editable, as users do), check
# `tickgate plugins --json` lists every distribution, run the example's replay and
# gate with its policy, and run the example's own tests (tickgate.testing contracts).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3.11}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install -q "$repo/core" "$repo/adapters/vllm" "$repo/adapters/sglang" "$repo/adapters/trtllm" \
    "$repo/examples/tickgate-example-adapter" pytest
tg="$work/venv/bin/tickgate"

"$tg" plugins --json > "$work/plugins.json"
"$work/venv/bin/python" - "$work/plugins.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
dists = {row["distribution"] for row in rows}
need = {"tickgate", "tickgate-vllm", "tickgate-sglang", "tickgate-trtllm", "tickgate-example-adapter"}
missing = sorted(need - dists)
assert not missing, f"tickgate plugins --json lacks: {missing}"
mine = sorted((r["kind"], r["name"]) for r in rows if r["distribution"] == "tickgate-example-adapter")
assert mine == [("admission", "shortest-prompt-aging"), ("backend_mirror", "example-csv")], mine
print("plugins: ok,", len(rows), "plugins from", ", ".join(sorted(dists)))
PY

cd "$repo/examples/tickgate-example-adapter"
"$tg" validate policies/example.yaml
"$tg" replay --input samples/workload.json --policy policies/example.yaml --output "$work/replay.json"
"$tg" gate --baseline samples/baseline.csv --candidate samples/candidate.csv \
    --policy policies/example.yaml --output "$work/gate.json"            # promote: exit 0
set +e
"$tg" gate --baseline samples/baseline.csv --candidate samples/candidate-slow.csv \
    --policy policies/example.yaml --output "$work/gate-slow.json" --quiet
code=$?
set -e
[ "$code" -eq 10 ] || { echo "expected hold (exit 10) for candidate-slow.csv, got $code" >&2; exit 1; }
"$tg" schema --output "$work/policy.schema.json"
# the example's tests, against the installed package (not the source tree), without the
# repository's own conftest.py above it (a third party's package has none)
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider -o addopts= --rootdir "$PWD" --confcutdir "$PWD" tests
echo "example-adapter: ok"
