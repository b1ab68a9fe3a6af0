"""Race OpenAI-compatible servers already running: N concurrent streaming chat requests, then 1.

Arms alternate round by round in one run. Each request: a ~370-token user message (distinct
per request, so only the chat template's system prompt is shared), greedy, ignore_eos,
--max-tokens output tokens. Prints, per arm and phase, the median over rounds of the aggregate
output tok/s, the slowest TTFT and the ITL p50 (gaps between streamed content chunks).

    python scripts/serve_race.py --arm llama=http://127.0.0.1:8081 \
        --arm engine=http://127.0.0.1:8083 --rounds 3
"""

import argparse
import asyncio
import json
import random
import statistics
import time

import aiohttp

WORDS = [
    "the",
    "model",
    "reads",
    "a",
    "long",
    "request",
    "about",
    "rivers",
    "cities",
    "trains",
    "and",
    "old",
    "maps",
    "then",
]


def message(seed: int, words: int = 300) -> str:
    rng = random.Random(seed)
    return "Summarize this: " + " ".join(rng.choice(WORDS) for _ in range(words))


async def one(session, url: str, seed: int, max_tokens: int) -> dict:
    body = {
        "messages": [{"role": "user", "content": message(seed)}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    t0 = time.perf_counter()
    stamps = []
    async with session.post(f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for raw in r.content:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                stamps.append(time.perf_counter())
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {"ttft": stamps[0] - t0, "gaps": gaps, "end": stamps[-1]}


async def phase(url: str, clients: int, max_tokens: int, seed: int) -> dict:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as s:
        t0 = time.perf_counter()
        rs = await asyncio.gather(*(one(s, url, seed + i, max_tokens) for i in range(clients)))
    wall = max(r["end"] for r in rs) - t0
    return {
        "tok_s": clients * max_tokens / wall,
        "ttft_max": max(r["ttft"] for r in rs),
        "itl_p50": statistics.median(g for r in rs for g in r["gaps"]),
    }


async def main(args) -> None:
    arms = dict(a.split("=", 1) for a in args.arm)
    results = {(arm, n): [] for arm in arms for n in (args.clients, 1)}
    for rnd in range(args.rounds):
        for n in (args.clients, 1):
            for arm, url in arms.items():
                r = await phase(url, n, args.max_tokens, seed=1000 * rnd + 10 * n)
                results[(arm, n)].append(r)
                print(f"round {rnd} {arm} {n} clients: {r}", flush=True)
    print("median over rounds:")
    for (arm, n), rs in results.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(
            f"{arm:>12} {n} clients: {med['tok_s']:.1f} tok/s, slowest TTFT "
            f"{med['ttft_max']:.2f} s, ITL p50 {1000 * med['itl_p50']:.1f} ms"
        )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arm", action="append", required=True, help="NAME=BASE_URL (repeat)")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(p.parse_args()))
