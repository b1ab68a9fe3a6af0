"""Client processes: a phase's streams spread over worker processes, each with its own event
loop and connection pool, so that one Python process parsing every stream's events does not
set the latencies (docs/measurement.md, "More than one client process"). Records come back as
each request ends and are merged in request order; every process stamps them on the same
monotonic clock (perf_counter is CLOCK_MONOTONIC), from the run's t0."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from harness.load import event_loop
from harness.load.client_check import LagProbe
from harness.load.frozen_gc import frozen_gc
from harness.load.load import LoadDriver, finish, make_session
from harness.load.prompts import Prompt
from harness.load.record import RequestRecord
from harness.workload.phase import Phase
from harness.workload.suite import Suite

STREAMS_PER_PROC = 32  # what one process reads on time (docs/measurement.md, dated)


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def auto_procs(streams: int, cores: int | None) -> int:
    """`client_procs = "auto"`: a process per STREAMS_PER_PROC streams, at most one per
    usable core (at least one)."""
    return max(1, min(-(-streams // STREAMS_PER_PROC), cores or 1))


def procs_for(suite: Suite) -> int:
    """The client processes a run of `suite` fires from: its `client_procs`, or for `auto`
    one per STREAMS_PER_PROC of the most clients any phase has, up to this machine's cores."""
    most = max(p.clients for p in suite.phases)
    return suite.client_procs or auto_procs(most, usable_cores())


def split(units: list[int], clients: int, n: int) -> list[tuple[list[int], int]]:
    """Units dealt round-robin over `n` processes, with the phase's clients divided as evenly
    (each process at least one): the same requests, the same concurrency in all."""
    shares = [units[w::n] for w in range(n)]
    return [(s, max(clients // n + (w < clients % n), 1)) for w, s in enumerate(shares) if s]


class ClientWorkers:
    """`n` worker processes for one run, started once and used by every phase."""

    def __init__(
        self, n: int, base: str, model: str, t0: float, clients: int, api_key: str = ""
    ) -> None:
        ctx = multiprocessing.get_context("spawn")  # the harness runs threads: no fork
        self.n, self.t0, self.conns, self.procs = n, t0, [], []
        self.probes: list[LagProbe] = []
        args = (base, model, t0, -(-clients // n), api_key)
        for _ in range(n):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(target=work, args=(theirs, *args), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(ours)
            self.procs.append(proc)

    async def fire(
        self,
        phase: Phase,
        prompts: list[Prompt],
        units: list[int],
        start: float,
        phase_end: float,
        on_done: Callable[[RequestRecord], None],
        stop: asyncio.Event,
    ) -> list[RequestRecord]:
        loop, inbox = asyncio.get_running_loop(), asyncio.Queue[Any]()
        shares = split(units, phase.clients, self.n)
        for w, (share, clients) in enumerate(shares):
            self.conns[w].send(("fire", phase, prompts, share, start, phase_end, clients))
            reader = threading.Thread(target=_read, args=(self.conns[w], w, loop, inbox))
            reader.daemon = True
            reader.start()
        stopping = asyncio.ensure_future(_stop_when(stop, self.conns[: len(shares)]))
        records: list[RequestRecord] = []
        by_worker: dict[int, list[RequestRecord]] = {}  # whose loop read each record
        ended = 0
        try:
            while ended < len(shares):
                kind, payload, w = await inbox.get()
                if kind == "done":
                    if payload.raw is not None:  # read raw there, parsed here: off its loop
                        finish(payload)
                    records.append(payload)
                    by_worker.setdefault(w, []).append(payload)
                    on_done(payload)
                elif kind == "end":
                    probe = LagProbe(*payload)
                    probe.saw(by_worker.get(w, []), self.t0)
                    self.probes.append(probe)
                    ended += 1
                else:  # the process is gone: its unfinished requests failed
                    ended += 1
        finally:
            stopping.cancel()
        got = {r.index for r in records}
        turns = phase.turns  # a unit is a conversation of `turns` requests, or one request
        sent = (i for unit in units for i in range(unit * turns, unit * turns + turns))
        for i in (i for i in sent if i not in got):
            rec = RequestRecord(phase.name, i, prompts[i].tokens,
                                prompts[i].max_tokens or phase.max_tokens)  # fmt: skip
            rec.arrival = rec.send = rec.end = time.perf_counter() - self.t0
            rec.error = "not sent: its client process exited"
            records.append(rec)
        return sorted(records, key=lambda r: (r.index, r.turn))

    def take_probes(self) -> list[LagProbe]:
        """The worker processes' lag probes since the last call (one per share fired)."""
        probes, self.probes = self.probes, []
        return probes

    def close(self) -> None:
        for conn in self.conns:
            with suppress(OSError):
                conn.send(None)
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


@contextmanager
def client_workers(
    n: int, base: str, model: str, t0: float, clients: int, api_key: str = ""
) -> Iterator[ClientWorkers | None]:
    """`n` client processes for a run, stopped at its end; None (the run's own loop fires
    every request) for one."""
    if n <= 1:
        yield None
        return
    workers = ClientWorkers(n, base, model, t0, clients, api_key)
    try:
        yield workers
    finally:
        workers.close()


def _read(conn, w: int, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue) -> None:
    """Worker w's messages, from its process to the loop, until its end (or the process's)."""
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            loop.call_soon_threadsafe(inbox.put_nowait, ("gone", None, w))
            return
        loop.call_soon_threadsafe(inbox.put_nowait, (kind, payload, w))
        if kind == "end":
            return


async def _stop_when(stop: asyncio.Event, conns: list) -> None:
    await stop.wait()
    for conn in conns:
        with suppress(OSError):
            conn.send(("stop",))


def work(conn, base: str, model: str, t0: float, clients: int, api_key: str) -> None:
    """A worker process: fire each share it is sent, sending back each record as it ends and
    its lag probe at the end; `None` ends it."""
    event_loop.run(_work(conn, base, model, t0, clients, api_key))


async def _work(conn, base: str, model: str, t0: float, clients: int, api_key: str) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue = asyncio.Queue()

    def receive() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = None
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
            if msg is None:
                return

    threading.Thread(target=receive, daemon=True).start()
    async with make_session(clients, api_key=api_key) as session:
        driver = LoadDriver(session, base, model, t0, raw_to_parent=True)
        while (msg := await inbox.get()) is not None:
            if msg[0] != "fire":
                continue
            _, phase, prompts, share, start, phase_end, clients = msg
            driver.stop.clear()
            listening = asyncio.ensure_future(_listen(inbox, driver))
            probe = LagProbe()
            with frozen_gc():
                probe.start()
                await driver.fire(phase, prompts, share, start, phase_end,
                                  lambda r: conn.send(("done", r)), clients)  # fmt: skip
                probe.stop()
            listening.cancel()
            conn.send(("end", probe.payload()))


async def _listen(inbox: asyncio.Queue, driver: LoadDriver) -> None:
    """While a share runs: a stop from the parent (its server is gone) stops it too."""
    while True:
        msg = await inbox.get()
        if msg is None or msg[0] == "stop":
            driver.stop.set()
            if msg is None:
                inbox.put_nowait(None)  # the main loop ends after this share
                return
