"""Seeded synthetic Mooncake-style trace generator (benchmark input).

    python benchmarks/gen_mooncake.py --n 100000 --seed 1 --out /tmp/mc100k.jsonl

Poisson arrivals at ``--rate`` requests/s (default 3), input lengths uniform
in 64..2048 tokens, output lengths uniform in 16..512, and unique hash ids at
block size 16 (``ceil(input/16)`` fresh ids per request: no prefix sharing),
exactly the layout ``tickgate import mooncake --block-size 16`` reads.
Timestamps are integer milliseconds, as in the Mooncake release. The same
``--n/--seed/--rate`` always give the same bytes.
"""

from __future__ import annotations

import argparse
import random
import sys

BLOCK = 16


def generate(n: int, seed: int, rate: float, out: "object") -> None:
    rng = random.Random(seed)
    t = 0.0
    next_id = 0
    write = out.write  # type: ignore[attr-defined]
    for _ in range(n):
        t += rng.expovariate(rate) * 1000.0
        prompt = rng.randint(64, 2048)
        output = rng.randint(16, 512)
        blocks = -(-prompt // BLOCK)
        ids = ", ".join(map(str, range(next_id, next_id + blocks)))
        next_id += blocks
        write(f'{{"timestamp": {int(t)}, "input_length": {prompt}, "output_length": {output}, '
              f'"hash_ids": [{ids}]}}\n')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, required=True, help="number of requests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=3.0, help="mean arrivals per second")
    ap.add_argument("--out", required=True, help="output JSONL ('-' for stdout)")
    args = ap.parse_args(argv)
    if args.out == "-":
        generate(args.n, args.seed, args.rate, sys.stdout)
    else:
        with open(args.out, "w", encoding="utf-8", newline="\n") as fh:
            generate(args.n, args.seed, args.rate, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
