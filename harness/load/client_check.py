"""The client measuring itself: whether the load generator, not the server, set a phase's
numbers. Each reading event loop reads, beside the streams, a loopback TCP connection on which
a small writer process sends a message due every millisecond, stamped with when it was due:
how long after that each was read is a token's read lag, measured on the path a token takes
(the socket, the loop, a task woken to read); each token the phase read is given the lag of
the messages read nearest it, and the quantiles are over those tokens. A timer on the loop
also records how late it woke (the share of the phase the loop was behind); the loop thread's
CPU time over the phase says how close to a whole core it ran; each stream counts the tokens
that came in one read with another of its tokens (docs/measurement.md, "The client's own
check")."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

PROBE_INTERVAL_S = 0.001
# Each message carries the time it was due, and a writer woken late sends every message due
# since: a machine too busy to run the writer on time counts against the client beside it.
WRITER = """import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
every, due = float(sys.argv[2]), time.perf_counter()
while True:  # until the reader is gone: then send fails and this ends
    n = int((time.perf_counter() - due) / every) + 1
    s.sendall(b"".join(struct.pack("<d", due + k * every) for k in range(n)))
    due += n * every
    time.sleep(max(due - time.perf_counter(), 0.0))
"""
LAG_FLOOR_MS = 5.0  # a median read lag this small is within any token gap worth gating
LAG_ITL_SHARE = 0.25  # ... and beyond it, a quarter of the phase's median token gap


@dataclass(slots=True)
class LagProbe:
    """Started before a phase's load and stopped after it, on the loop that reads the streams:
    the writer's messages' read lags (`reads`: when each was due, how many ms it waited), the
    timer's lags, and (`saw`) when the phase's tokens were read."""

    lags_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    reads: list[tuple[float, float]] = field(default_factory=list)
    tokens_at: list[tuple[float, int]] = field(default_factory=list)  # (when read, tokens)
    _tasks: list[asyncio.Task] = field(default_factory=list)
    _writer: subprocess.Popen | None = None
    _started: tuple[float, float] = (0.0, 0.0)

    def start(self) -> None:
        self._started = (time.perf_counter(), time.thread_time())
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._probe()), loop.create_task(self._read())]

    async def _probe(self) -> None:
        while True:
            due = time.perf_counter() + PROBE_INTERVAL_S
            await asyncio.sleep(PROBE_INTERVAL_S)
            self.lags_ms.append(max(time.perf_counter() - due, 0.0) * 1e3)

    async def _read(self) -> None:
        """The writer's messages, read as a stream's tokens are; none where it cannot start
        (the timer's figure stands in)."""
        with socket.create_server(("127.0.0.1", 0)) as server:
            server.setblocking(False)
            port = server.getsockname()[1]
            args = [sys.executable, "-c", WRITER, str(port), str(PROBE_INTERVAL_S)]
            try:
                self._writer = subprocess.Popen(args, stderr=subprocess.DEVNULL)
                sock, _ = await asyncio.wait_for(asyncio.get_running_loop().sock_accept(server), 10)
            except (OSError, TimeoutError):
                return
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            pending = b""
            while data := await reader.read(1 << 16):
                now, pending = time.perf_counter(), pending + data
                whole = len(pending) - len(pending) % 8
                for (sent,) in struct.iter_unpack("<d", pending[:whole]):
                    self.reads.append((sent, (now - sent) * 1e3))
                pending = pending[whole:]
        finally:
            writer.close()

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._writer is not None:
            self._writer.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._writer.wait(5)
        wall0, cpu0 = self._started
        self.wall_s, self.cpu_s = time.perf_counter() - wall0, time.thread_time() - cpu0

    def read_lag_ms(self, q: float) -> float:
        """The `q` quantile of the read lag a token met. Where the phase's token reads are
        known, each token is weighted as one, with the mean lag of the writer's messages read
        at the nearest moment (a client and a server sharing cores take turns: tokens pile up
        while the client waits, so they meet its stalls more often than a moment does); else
        each message weighted by the time since the one before; else the timer's estimate."""
        if len(self.reads) < 2:
            return read_lag_ms(self.lags_ms, self.wall_s * 1e3, q)
        if self.tokens_at:
            return quantile(token_lags(self.reads, self.tokens_at), q)
        ordered = sorted(self.reads)
        pairs = zip(ordered, ordered[1:], strict=False)
        return quantile([(lag, sent - before) for (before, _), (sent, lag) in pairs], q)

    def saw(self, records, t0: float) -> None:
        """The tokens its loop read (records' `reads`, on the run's clock from `t0`)."""
        self.tokens_at += [(t0 + t, k) for r in records for t, k in r.reads]

    def payload(self) -> tuple:  # (its token reads are the run process's to add)
        """What a client worker sends back: LagProbe(*payload) is this probe."""
        return self.lags_ms, self.cpu_s, self.wall_s, self.reads

    @property
    def late_share(self) -> float:
        """The share of the window the loop was behind: the timer's late time over it."""
        return min(sum(self.lags_ms) / (self.wall_s * 1e3), 1.0) if self.wall_s > 0 else 0.0


def quantile(weighted: list[tuple[float, float]], q: float) -> float:
    """The `q` quantile of (value, weight) pairs."""
    ordered = sorted(weighted)
    total, acc = sum(w for _, w in ordered), 0.0
    for value, w in ordered:
        acc += w
        if acc >= q * total:
            return value
    return ordered[-1][0]


def token_lags(reads: list[tuple[float, float]], tokens_at: list[tuple[float, int]]):
    """(lag, tokens) for each token read: the mean lag of the messages read in the nearest
    read of the writer's socket (messages read at one moment share it: due + lag)."""
    moments: dict[float, list[float]] = {}
    for due, lag in reads:
        moments.setdefault(round(due + lag / 1e3, 7), []).append(lag)
    times = sorted(moments)
    means = [sum(moments[t]) / len(moments[t]) for t in times]
    out = []
    for at, k in tokens_at:
        i = bisect.bisect_left(times, at)
        near = min((j for j in (i - 1, i) if 0 <= j < len(times)), key=lambda j: abs(times[j] - at))
        out.append((means[near], k))
    return out


def read_lag_ms(lags_ms: list[float], wall_ms: float, q: float) -> float:
    """From the timer's lags alone: the `q` quantile, over the window's time, of how long a
    read arriving then waited for the loop to be free (a wake-up late by s ms was s ms of
    stall, and a read that came x ms into it waited s - x; the time in which a read waits more
    than x is the sum of max(0, s - x)). A lower bound: a busy loop's reads also wait for
    their turn after it, which only the writer's messages see."""
    target = (1 - q) * wall_ms
    stalls = sorted(lags_ms, reverse=True)
    total = 0.0
    for k, lag in enumerate(stalls, start=1):
        total += lag
        below = stalls[k] if k < len(stalls) else 0.0
        x = (total - target) / k  # with the k longest stalls longer than x
        if x >= below:
            return max(x, 0.0)
    return 0.0


def client_summary(probes: list[LagProbe], tokens: int, coalesced: int, processes: int = 1) -> dict:
    """A phase's `client`: the read lag (p50, p95, per token) and the share of the phase
    behind of the loop that read the slowest (the run's own, or its client workers'
    while they fired), its wake-ups' lags (p50, p95, max), the busiest loop's CPU share, and the
    share of the tokens that arrived in a read with another of the same stream's tokens."""
    lags = sorted(lag for p in probes for lag in p.lags_ms)
    shares = [p.cpu_s / p.wall_s for p in probes if p.wall_s > 0]
    timed = [p for p in probes if p.wall_s > 0]
    worst = max(timed, key=lambda p: (p.read_lag_ms(0.5), p.late_share), default=None)

    def q(p: float) -> float | None:
        return round(lags[min(len(lags) - 1, int(p * len(lags)))], 3) if lags else None

    return {
        "read_lag_p50_ms": round(worst.read_lag_ms(0.5), 3) if worst else None,
        "read_lag_p95_ms": round(worst.read_lag_ms(0.95), 3) if worst else None,
        "late_share": round(worst.late_share, 4) if worst else None,
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
    """The most a token may wait for the client's loop at the median before its reads, not
    the server, set the latencies: 5 ms, or a quarter of the median token gap where longer."""
    return max(LAG_FLOOR_MS, LAG_ITL_SHARE * (itl_p50_ms or 0.0))


def client_fell_behind(phase: str, client: dict, itl_p50_ms: float | None) -> str | None:
    """One line when the phase's reads waited past the bound at the median, else None. The
    median token, not a tail: a loop behind most of the time is the client's
    own backlog, while a few late wake-ups are the machine preempting it (noise the rounds
    average)."""
    lag = client.get("read_lag_p50_ms")
    bound = lag_bound_ms(itl_p50_ms)
    if lag is None or lag <= bound:
        return None
    late, cpu = client.get("late_share"), client.get("cpu_share")
    behind = f", behind {late:.0%} of the phase" if late is not None else ""
    busy = f", its loop busy {cpu:.0%} of the time" if cpu is not None else ""
    return (
        f"phase {phase!r}: the client fell behind: a token waited {lag:.1f} ms for its read at "
        f"the median (the bound is {bound:.1f} ms{behind}{busy}), so its reads, not the "
        "server, set the latencies; spread the streams over more client processes "
        "(--client-procs auto) or run fewer"
    )
