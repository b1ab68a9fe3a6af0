"""Served ITL against the server's own decode step: N concurrent streaming chat requests
(greedy, ignore_eos), the ITL p50 of their tokens, and the mean of the decode steps the server
timed meanwhile (`engine_step_seconds{kind="decode"}` in /metrics). The reference engine only.

    python scripts/served_vs_step.py http://127.0.0.1:8080 --clients 4 --bursts 3
"""

import argparse
import asyncio
import re
import statistics
import time
from itertools import pairwise

import aiohttp

STEP = r'engine_step_seconds_{}\{{kind="decode"\}} (\S+)'


async def decode_steps(session: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    async with session.get(f"{url}/metrics") as r:
        text = await r.text()
    found = [re.search(STEP.format(k), text) for k in ("sum", "count")]
    return tuple(float(m.group(1)) if m else 0.0 for m in found)  # none before the first step


async def stream(session: aiohttp.ClientSession, url: str, model: str, i: int) -> list[float]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"Story {i}: " + "the sea and ships " * 60}],
        "max_tokens": 128,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    times = []
    async with session.post(f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.content:
            if line.startswith(b"data: {"):
                times.append(time.perf_counter())
    return [b - a for a, b in pairwise(times[2:])]  # after the role chunk and token 1


async def main(args: argparse.Namespace) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{args.url}/v1/models") as r:
            model = (await r.json())["data"][0]["id"]
        for burst in range(args.bursts):
            s0, n0 = await decode_steps(session, args.url)
            gaps = await asyncio.gather(
                *(stream(session, args.url, model, 100 * burst + i) for i in range(args.clients))
            )
            s1, n1 = await decode_steps(session, args.url)
            itl = statistics.median(g for gs in gaps for g in gs)
            step = (s1 - s0) / (n1 - n0)
            print(
                f"{args.clients} clients: ITL p50 {itl * 1e3:.2f} ms, decode step mean "
                f"{step * 1e3:.2f} ms over {n1 - n0:.0f} steps: {itl / step:.2f}x"
            )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--bursts", type=int, default=3)
    asyncio.run(main(p.parse_args()))
