"""Write a small request trace in the Mooncake format (JSON lines: timestamp in ms,
input_length, output_length, hash_ids), seeded, for the trace-replay suite:

    python scripts/make_trace.py --requests 24 --rate 2 --seed 1 > suites/traces/small.jsonl

Requests arrive at Poisson times. Each prompt is whole 512-token blocks plus a partial one; a
share of them open with one of a few common prefixes (a system prompt, a document) of one or
two blocks, so that requests share hash ids the way a production trace's do."""

from __future__ import annotations

import argparse
import json
import random
import sys

BLOCK = 512


def trace(requests: int, rate: float, seed: int, prefixes: int, shared: float) -> list[dict]:
    rng = random.Random(seed)
    roots = [[1000 * (k + 1) + j for j in range(rng.choice((1, 2)))] for k in range(prefixes)]
    next_id, t, rows = 1, 0.0, []
    for _ in range(requests):
        head = rng.choice(roots) if rng.random() < shared else []
        tail_tokens = rng.randint(64, 600)
        length = BLOCK * len(head) + tail_tokens
        tail_blocks = -(-tail_tokens // BLOCK)
        ids = [*head, *range(next_id, next_id + tail_blocks)]
        next_id += tail_blocks
        rows.append({"timestamp": round(t), "input_length": length,
                     "output_length": rng.randint(8, 48), "hash_ids": ids})  # fmt: skip
        t += rng.expovariate(rate) * 1000
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--rate", type=float, default=2.0, help="mean requests per second")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefixes", type=int, default=3, help="common prefixes to share")
    p.add_argument("--shared", type=float, default=0.75, help="share of requests that use one")
    a = p.parse_args()
    for row in trace(a.requests, a.rate, a.seed, a.prefixes, a.shared):
        sys.stdout.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
