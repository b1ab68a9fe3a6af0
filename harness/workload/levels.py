"""A load level: a suite's first phase reshaped to a concurrency (closed loop, clients) or a
rate (open loop, requests/s), with enough requests for a p95. `harness sweep` runs a plan of
them; a capacity search (capacity.py) picks them one at a time."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from harness.workload.arrival import Concurrency, at_rate

if TYPE_CHECKING:
    from harness.workload.phase import Phase

MIN_REQUESTS = 16  # per level: p95 from >= 16 requests, the 15th-16th order statistics
PER_CLIENT = 4  # closed loop: each client sends >= 4 requests, so the first wave is a quarter
RATE_SECONDS = 8  # open loop: >= 8 seconds of arrivals at the level's rate


def level_name(level: float, mode: str) -> str:
    return f"c{level:g}" if mode == "concurrency" else f"r{level:g}"


MAX_REQUESTS = 4096  # per level: a p95 needs far fewer; memory and time stay bounded


def default_requests(level: float, mode: str) -> int:
    if mode == "concurrency":
        return min(MAX_REQUESTS, max(MIN_REQUESTS, PER_CLIENT * int(level)))
    return min(MAX_REQUESTS, max(MIN_REQUESTS, math.ceil(RATE_SECONDS * level)))


def level_phase(base: Phase, mode: str, level: float, requests: int | None = None) -> Phase:
    """`base` at `level`; its own seed per level, so no level reuses another's prompts (a
    server with a prompt cache would otherwise serve later levels from it)."""
    n = requests or default_requests(level, mode)
    seed = base.seed + round(level * 1000)
    name = level_name(level, mode)
    if mode == "concurrency":
        return replace(base, arrival=Concurrency(), clients=int(level), name=name, requests=n,
                       seed=seed)  # fmt: skip
    rate = at_rate(base.arrival, float(level))  # a rate phase keeps its burstiness at each level
    return replace(base, arrival=rate, clients=n, name=name, requests=n, seed=seed)
