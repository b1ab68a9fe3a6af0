"""The load generator: streaming OpenAI requests fired by burst, closed-loop concurrency or at
seeded arrival times (arrivals.py), each timed from send to first content chunk to end of
stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Protocol

import aiohttp

from harness.load.arrivals import arrival_offsets
from harness.load.baton import Baton, turn
from harness.load.cancels import cancelled
from harness.load.prompts import Prompt
from harness.load.record import RequestRecord
from harness.load.server_reads import ERROR_CAP, read_body
from harness.load.stream import OVER_LONG, Stream, ended, error_text, parse
from harness.workload.phase import Phase


class Workers(Protocol):
    """Client processes that fire a phase's requests (workers.ClientWorkers)."""

    n: int  # processes

    def take_probes(self) -> list: ...  # their lag probes since the last call

    async def fire(
        self, phase: Phase, prompts: list[Prompt], units: list[int], start: float,
        phase_end: float, on_done: Callable[[RequestRecord], None], stop: asyncio.Event,
    ) -> list[RequestRecord]: ...  # fmt: skip


READ_BUFSIZE = 10 * 1024 * 1024  # one SSE line must fit; a small buffer also costs reads
RAW_BACKLOG_BYTES = 64 << 20  # raw reads held for parsing after the phase; beyond, parsed now


def make_session(
    clients: int = 256, read_timeout_s: float = 300.0, api_key: str = ""
) -> aiohttp.ClientSession:
    """One session, one connector, for the whole run (probes and load alike); with an API key,
    every request carries it."""
    connector = aiohttp.TCPConnector(limit=max(clients, 1) + 8, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout_s)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, read_bufsize=READ_BUFSIZE, headers=headers
    )


def request_body(
    phase: Phase, model: str, prompt: str | list[dict], max_tokens: int | None = None
) -> tuple[str, dict]:
    """The path and JSON body of one streamed request; a chat prompt is one user message, or
    the whole conversation so far (a list of messages)."""
    body = {
        "model": model,
        "max_tokens": max_tokens or phase.max_tokens,
        "temperature": phase.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if phase.ignore_eos:
        body["ignore_eos"] = True
    if phase.endpoint == "chat":
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body | {"messages": messages}
    return "/v1/completions", body | {"prompt": prompt}


class LoadDriver:
    """Runs the requests of one phase against `base` and returns their records."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base: str,
        model: str,
        t0: float,
        baton: tuple[Baton, str] | None = None,  # shared with arms measured at once, our name
        workers: Workers | None = None,  # client processes that fire the requests
        raw_to_parent: bool = False,  # a client worker: the run's process parses its reads
    ) -> None:
        self.session, self.base, self.model, self.t0 = session, base, model, t0
        self.baton: Baton | None = baton[0] if baton else None
        self.arm = baton[1] if baton else ""
        self.workers, self.raw_to_parent = workers, raw_to_parent
        self.unparsed: list[RequestRecord] = []  # streams read raw, parsed after the phase
        self.unparsed_bytes = 0
        self.stop = asyncio.Event()  # set when the server is gone: unsent requests are skipped
        self.paused: dict[str, float] = {}  # per phase: seconds between its bursts spent waiting

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def own_turn(self):
        """A turn for work between bursts (probes) while other arms' bursts are measured."""
        return turn(self.baton, self.arm)

    async def run_phase(
        self,
        phase: Phase,
        prompts: list[Prompt],
        on_done: Callable[[RequestRecord], None] = lambda r: None,
    ) -> list[RequestRecord]:
        """Fire the phase; a burst phase with `bursts` > 1 fires its bursts back to back, each
        with fresh prompts (`prompts` holds them all), each when the previous one has ended.
        With client workers every burst (or the whole phase) is shared out among them."""
        phase_end = self.now() + phase.phase_timeout_s
        if phase.turns > 1:
            async with turn(self.baton, self.arm):
                units = range(phase.requests)
                return await self._share(phase, prompts, units, self.now(), phase_end, on_done)
        records: list[RequestRecord] = []
        self.paused[phase.name] = 0.0
        for b in range(phase.bursts):  # a gone server: the later bursts record "not sent"
            async with turn(self.baton, self.arm) as waited:  # one turn of arms measured at once
                phase_end += waited  # the other arms' turns count against neither the deadline
                self.paused[phase.name] += waited if b else 0.0  # nor the throughput's span
                first = b * phase.requests
                batch = range(first, first + phase.requests)
                records += await self._share(phase, prompts, batch, self.now(), phase_end, on_done)
        return records

    async def _share(
        self,
        phase: Phase,
        prompts: list[Prompt],
        units: range,
        start: float,
        phase_end: float,
        on_done: Callable[[RequestRecord], None],
    ) -> list[RequestRecord]:
        """`fire` here, or dealt out to the client workers."""
        if self.workers is None:
            return await self.fire(phase, prompts, list(units), start, phase_end, on_done)
        return await self.workers.fire(phase, prompts, list(units), start, phase_end, on_done,
                                       self.stop)  # fmt: skip

    async def fire(
        self,
        phase: Phase,
        prompts: list[Prompt],
        units: list[int],
        start: float,
        phase_end: float,
        on_done: Callable[[RequestRecord], None] = lambda r: None,
        clients: int | None = None,
    ) -> list[RequestRecord]:
        """Requests `units` of the phase (conversations, when it has turns), each due at
        `start` plus its arrival offset, at most `clients` (the phase's) at once."""
        offsets, dropped = arrival_offsets(phase), cancelled(phase)
        slots = asyncio.Semaphore(clients or phase.clients)
        if phase.turns > 1:
            return await self._conversations(
                phase, prompts, units, (offsets, dropped), slots, start, phase_end, on_done
            )

        async def one(i: int) -> RequestRecord:
            rec = RequestRecord(
                phase.name, i, prompts[i].tokens, prompts[i].max_tokens or phase.max_tokens
            )
            if offsets is not None:
                due = start + offsets[i % len(offsets)]
                await self._sleep_until(min(due, phase_end))
                rec.arrival = due
            async with slots:
                left = phase_end - self.now()
                if self.stop.is_set() or left <= 0:
                    rec.arrival = rec.send = rec.end = self.now()
                    rec.error = "not sent: " + (
                        "the server was gone" if self.stop.is_set() else phase_deadline(phase)
                    )
                else:
                    if offsets is None:
                        rec.arrival = self.now()
                    await self.request(phase, prompts[i].text, rec, left, cancel=i in dropped,
                                       later=True)  # fmt: skip
            on_done(rec)
            return rec

        try:
            return list(await asyncio.gather(*(one(i) for i in units)))
        finally:
            self.parse_unparsed()

    def parse_unparsed(self) -> None:
        """Parse the streams read raw (off the reading path: after the phase, or once their
        bytes pass RAW_BACKLOG_BYTES)."""
        for rec in self.unparsed:
            finish(rec)
        self.unparsed, self.unparsed_bytes = [], 0

    async def _conversations(
        self,
        phase: Phase,
        prompts: list[Prompt],
        units: list[int],
        chosen: tuple[list[float] | None, frozenset[int]],
        slots: asyncio.Semaphore,
        start: float,
        phase_end: float,
        on_done: Callable[[RequestRecord], None],
    ) -> list[RequestRecord]:
        """Conversations `units` of `turns` chat requests each, at most `clients` at once:
        turn k+1 sends the conversation so far, the server's own answers included, plus a new
        user message, `think_time_s` after turn k ended. A turn that fails ends its
        conversation (its later turns are recorded as not sent). `chosen`: the arrival offsets
        and the requests the client cancels."""
        offsets, dropped = chosen
        think_s = phase.conversation.think_time_s if phase.conversation else 0.0

        async def conversation(c: int) -> list[RequestRecord]:
            if offsets is not None:
                await self._sleep_until(min(start + offsets[c], phase_end))
            out, messages, reason = [], [], ""
            async with slots:
                for k in range(phase.turns):
                    i = c * phase.turns + k
                    rec = RequestRecord(phase.name, i, prompts[i].tokens, phase.max_tokens)
                    rec.turn = k + 1
                    rec.arrival = self.now()  # a later turn follows an answer
                    if offsets is not None and k == 0:
                        rec.arrival = start + offsets[c]
                    left = phase_end - self.now()
                    if reason or self.stop.is_set() or left <= 0:
                        why = reason or ("the server was gone" if self.stop.is_set()
                                         else phase_deadline(phase))  # fmt: skip
                        rec.arrival = rec.send = rec.end = self.now()
                        rec.error = f"not sent: {why}"
                    else:
                        messages.append({"role": "user", "content": prompts[i].text})
                        answer: list[str] = []
                        await self.request(phase, messages, rec, left, answer, i in dropped)
                        messages.append({"role": "assistant", "content": "".join(answer)})
                        if not rec.ok:
                            reason = f"turn {k + 1} of this conversation failed"
                        elif k + 1 < phase.turns and think_s:
                            await self._sleep_until(self.now() + think_s)
                    on_done(rec)
                    out.append(rec)
            return out

        done = await asyncio.gather(*(conversation(c) for c in units))
        return [rec for conv in done for rec in conv]

    async def _sleep_until(self, due: float) -> None:
        """Until `due` or the server is gone; never early (libuv's timers round to the
        millisecond, so a wait may end up to one before its time: the rest is waited too)."""
        while (delay := due - self.now()) > 0 and not self.stop.is_set():
            with suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), delay)

    async def request(
        self,
        phase: Phase,
        prompt: str | list[dict],
        rec: RequestRecord,
        left_s: float = float("inf"),
        answer: list[str] | None = None,
        cancel: bool = False,
        later: bool = False,
    ) -> None:
        """Stream one request into `rec`, within its deadline and what is left of the phase's;
        any failure is recorded on it, never raised. `answer`, when given, collects the text.
        With `cancel`, the client drops it as the phase says (cancels.py): the connection is
        closed after so many tokens or so long after sending. With `later`, a stream read raw
        is parsed by `parse_unparsed` (or, in a client worker, by the run's process)."""
        path, body = request_body(phase, self.model, prompt, rec.max_tokens)
        rec.send = self.now()
        deadline = min(phase.request_deadline_s, left_s)
        cancels = phase.cancels if cancel else None
        after_s = cancels.after_ms / 1e3 if cancels and cancels.after_ms else None
        after_tokens = cancels.after_tokens if cancels else None
        limit = min(deadline, after_s) if after_s else deadline
        try:
            async with asyncio.timeout(limit):
                async with self.session.post(self.base + path, json=body) as resp:
                    rec.status = resp.status
                    if resp.status != 200:
                        said = await read_body(resp, ERROR_CAP)
                        rec.error = error_text(said.decode("utf-8", "replace"))
                    else:
                        await self._read_stream(resp, rec, answer, after_tokens)
                        if rec.cancelled:
                            resp.close()  # the server sees the client go at its next write
        except TimeoutError:
            if after_s and limit < deadline:
                rec.cancelled = True
            else:
                rec.error = (
                    request_deadline(phase)
                    if deadline == phase.request_deadline_s
                    else phase_deadline(phase)
                )
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:500]
        rec.end = self.now()
        if rec.raw is None or self.raw_to_parent:
            return
        if not later:
            finish(rec)
            return
        self.unparsed.append(rec)
        self.unparsed_bytes += sum(len(data) for _, data in rec.raw)
        if self.unparsed_bytes > RAW_BACKLOG_BYTES:
            self.parse_unparsed()

    async def _read_stream(
        self,
        resp: aiohttp.ClientResponse,
        rec: RequestRecord,
        answer: list[str] | None = None,
        stop_after: int | None = None,
    ) -> None:
        """Read the stream a read at a time: every event of one read is stamped with its time,
        and the k tokens a read brings after the previous token's read record k gaps of 1/k of
        the time between (docs/measurement.md): tokens that waited in the socket for a late
        client make its ITL neither 0 nor fast. Where nothing needs the text as it comes, the
        reads are only stamped and kept (`rec.raw`), and parsed after. With `stop_after`, stop
        (cancelled) once that many tokens came (0: before the first)."""
        if stop_after == 0:
            rec.cancelled = True
            return
        if answer is None and stop_after is None:
            await self._read_raw(resp, rec)
            return
        stream, size = Stream(rec, answer), 0
        async for data in resp.content.iter_any():
            now, size = self.now(), size + len(data)
            if size > stream_cap(rec.max_tokens):
                rec.error = too_long(rec.max_tokens)
                break
            stream.feed(now, data)
            if stream.done or rec.error:
                break
            if stop_after is not None and rec.client_tokens >= stop_after:
                rec.cancelled = True
                return
        if not (stream.done or rec.error):
            stream.flush(self.now())
        ended(rec, stream)

    async def _read_raw(self, resp: aiohttp.ClientResponse, rec: RequestRecord) -> None:
        """What the timing needs where the bytes are read, and no more: each read's time and
        bytes, the end at [DONE], and a cap on events against a stream that never ends (each
        token is an event; the cap leaves room for the role, usage and finish events)."""
        rec.raw, events, most, size = [], 0, 2 * rec.max_tokens + 16, 0
        async for data in resp.content.iter_any():
            rec.raw.append((self.now(), data))
            if data.rstrip().endswith(b"[DONE]"):
                break
            events, size = events + data.count(b"data:"), size + len(data)
            if events > most:
                break
            if size > stream_cap(rec.max_tokens):
                rec.error = too_long(rec.max_tokens)
                break


def finish(rec: RequestRecord) -> None:
    """Parse a stream read raw into its record. A stream cut short by a deadline, an error or
    the client's own cancel keeps that as its outcome; its tokens are counted all the same."""
    chunks, rec.raw = rec.raw or [], None
    failed, rec.error = rec.error, ""
    parse(rec, chunks, complete=not (failed or rec.cancelled))
    rec.error = failed or rec.error


STREAM_BYTES_PER_TOKEN = 16 << 10  # a token's event, with logprobs: far under this
STREAM_BYTES_FLOOR = 1 << 20  # the role, usage and finish events, and any comments


def stream_cap(max_tokens: int) -> int:
    """The most bytes a stream of `max_tokens` may send before it is cut (as one that sends
    more tokens than asked is): a server cannot make the client hold what it streams forever."""
    return STREAM_BYTES_FLOOR + STREAM_BYTES_PER_TOKEN * max(max_tokens, 1)


def too_long(max_tokens: int) -> str:
    return f"{OVER_LONG}: more than {stream_cap(max_tokens) >> 10} KiB for {max_tokens} tokens"


DEADLINE = "deadline"


def request_deadline(phase: Phase) -> str:
    return f"request {DEADLINE} ({phase.request_deadline_s:g} s) passed before the stream finished"


def phase_deadline(phase: Phase) -> str:
    return f"phase {DEADLINE} ({phase.phase_timeout_s:g} s) passed"
