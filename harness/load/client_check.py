"""The client measuring itself: whether the load generator, not the server, set a phase's
numbers. A probe task on the client's event loop asks to wake every 5 ms and records how late
it woke (a loop busy parsing other streams' events reads every stream late by as much); the
loop thread's CPU time over the phase says how close to a whole core the client ran; and each
stream counts the tokens that came in one read with another of its tokens (docs/metrics.md,
"The client's own check")."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

PROBE_INTERVAL_S = 0.005
LAG_FLOOR_MS = 5.0  # a median lag this small is within any token gap worth gating
LAG_ITL_SHARE = 0.25  # ... and beyond it, a quarter of the phase's median token gap


@dataclass(slots=True)
class LagProbe:
    """Started before a phase's load and stopped after it, on the loop that runs the load."""

    lags_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    _task: asyncio.Task | None = None
    _started: tuple[float, float] = (0.0, 0.0)

    def start(self) -> None:
        self._started = (time.perf_counter(), time.thread_time())
        self._task = asyncio.get_running_loop().create_task(self._probe())

    async def _probe(self) -> None:
        while True:
            due = time.perf_counter() + PROBE_INTERVAL_S
            await asyncio.sleep(PROBE_INTERVAL_S)
            self.lags_ms.append(max(time.perf_counter() - due, 0.0) * 1e3)

    def stop(self) -> None:
        if self._task:
            self._task.cancel()
        wall0, cpu0 = self._started
        self.wall_s, self.cpu_s = time.perf_counter() - wall0, time.thread_time() - cpu0


def client_summary(probes: list[LagProbe], tokens: int, coalesced: int, processes: int = 1) -> dict:
    """A phase's `client`: the lag (p50, p95, max, ms) of the loops that read the streams
    (the run's own, or its client workers' while they fired), the busiest one's CPU share, and
    the share of the tokens that arrived in a read with another of the same stream's tokens."""
    lags = sorted(lag for p in probes for lag in p.lags_ms)
    shares = [p.cpu_s / p.wall_s for p in probes if p.wall_s > 0]

    def q(p: float) -> float | None:
        return round(lags[min(len(lags) - 1, int(p * len(lags)))], 3) if lags else None

    return {
        "lag_p50_ms": q(0.5),
        "lag_p95_ms": q(0.95),
        "lag_max_ms": round(lags[-1], 3) if lags else None,
        "wakeups": len(lags),
        "cpu_share": round(max(shares), 4) if shares else None,
        "processes": processes,
        "tokens": tokens,
        "coalesced_tokens": coalesced,
        "coalesced_share": round(coalesced / tokens, 4) if tokens else None,
    }


def lag_bound_ms(itl_p50_ms: float | None) -> float:
    """The most the client's loop may lag at the median before its reads, not the server, set
    the latencies: 5 ms, or a quarter of the median token gap where that is longer."""
    return max(LAG_FLOOR_MS, LAG_ITL_SHARE * (itl_p50_ms or 0.0))


def client_fell_behind(phase: str, client: dict, itl_p50_ms: float | None) -> str | None:
    """One line when the phase's client lagged past its bound at the median, else None. The
    median, not a tail: a loop that is behind most of the time is the client's own backlog,
    while a few late wake-ups are the machine preempting it (noise the rounds average)."""
    lag = client.get("lag_p50_ms")
    bound = lag_bound_ms(itl_p50_ms)
    if lag is None or lag <= bound:
        return None
    cpu = client.get("cpu_share")
    busy = f", its loop busy {cpu:.0%} of the time" if cpu is not None else ""
    return (
        f"phase {phase!r}: the client fell behind: its event loop woke {lag:.1f} ms late at "
        f"the median (the bound is {bound:.1f} ms{busy}), so its reads, not the server, set "
        "the latencies; spread the streams over more client processes or run fewer"
    )
