"""The load generator: streaming OpenAI requests fired by burst, closed-loop concurrency or at
seeded arrival times (arrivals.py), each timed from send to first content chunk to end of
stream."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import aiohttp

from harness.load.arrivals import arrival_offsets
from harness.load.baton import Baton, turn
from harness.load.prompts import Prompt
from harness.load.record import RequestRecord
from harness.workload.suite import Phase

READ_BUFSIZE = 10 * 1024 * 1024  # one SSE line must fit; a small buffer also costs reads
FAILED_FINISH = ("error", "cancelled")  # a stream the server ended this way did not complete


class StreamError(ValueError):
    """A stream event that is not an OpenAI chunk; the request is recorded as failed."""


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


@contextmanager
def frozen_gc() -> Iterator[None]:
    """No collector pauses inside a phase: collect, freeze the survivors, disable. Enter it
    before the phase's clock starts (a full collection takes tens of milliseconds)."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


class LoadDriver:
    """Runs the requests of one phase against `base` and returns their records."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base: str,
        model: str,
        t0: float,
        baton: tuple[Baton, str] | None = None,  # shared with arms measured at once, our name
    ) -> None:
        self.session, self.base, self.model, self.t0 = session, base, model, t0
        self.baton, self.arm = baton or (None, "")
        self.stop = asyncio.Event()  # set when the server is gone: unsent requests are skipped
        self.paused: dict[str, float] = {}  # per phase: seconds between its bursts spent waiting

    def now(self) -> float:
        return time.perf_counter() - self.t0

    async def run_phase(
        self,
        phase: Phase,
        prompts: list[Prompt],
        on_done: Callable[[RequestRecord], None] = lambda r: None,
    ) -> list[RequestRecord]:
        """Fire the phase; a burst phase with `bursts` > 1 fires its bursts back to back, each
        with fresh prompts (`prompts` holds them all), each when the previous one has ended."""
        offsets = arrival_offsets(phase)
        slots = asyncio.Semaphore(phase.clients)
        phase_end = self.now() + phase.phase_timeout_s

        async def one(i: int, start: float) -> RequestRecord:
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
                    await self.request(phase, prompts[i].text, rec, left)
            on_done(rec)
            return rec

        if phase.turns > 1:
            async with turn(self.baton, self.arm):
                return await self._conversations(phase, prompts, offsets, slots, phase_end, on_done)
        records: list[RequestRecord] = []
        self.paused[phase.name] = 0.0
        for b in range(phase.bursts):  # a gone server: the later bursts record "not sent"
            async with turn(self.baton, self.arm) as waited:  # one turn of arms measured at once
                phase_end += waited  # the other arms' turns count against neither the deadline
                self.paused[phase.name] += waited if b else 0.0  # nor the throughput's span
                start, first = self.now(), b * phase.requests
                batch = range(first, first + phase.requests)
                records += await asyncio.gather(*(one(i, start) for i in batch))
        return records

    async def _conversations(
        self,
        phase: Phase,
        prompts: list[Prompt],
        offsets: list[float] | None,
        slots: asyncio.Semaphore,
        phase_end: float,
        on_done: Callable[[RequestRecord], None],
    ) -> list[RequestRecord]:
        """`requests` conversations of `turns` chat requests each, at most `clients` at once:
        turn k+1 sends the conversation so far, the server's own answers included, plus a new
        user message, `think_time_s` after turn k ended. A turn that fails ends its
        conversation (its later turns are recorded as not sent)."""
        start = self.now()

        async def conversation(c: int) -> list[RequestRecord]:
            if offsets is not None:
                await self._sleep_until(min(start + offsets[c], phase_end))
            out, messages, reason = [], [], ""
            async with slots:
                for k in range(phase.turns):
                    i = c * phase.turns + k
                    rec = RequestRecord(phase.name, i, prompts[i].tokens, phase.max_tokens)
                    rec.turn = k + 1
                    due_at_start = offsets is not None and k == 0  # later turns follow answers
                    rec.arrival = start + offsets[c] if due_at_start else self.now()
                    left = phase_end - self.now()
                    if reason or self.stop.is_set() or left <= 0:
                        why = reason or ("the server was gone" if self.stop.is_set()
                                         else phase_deadline(phase))  # fmt: skip
                        rec.arrival = rec.send = rec.end = self.now()
                        rec.error = f"not sent: {why}"
                    else:
                        messages.append({"role": "user", "content": prompts[i].text})
                        answer: list[str] = []
                        await self.request(phase, messages, rec, left, answer)
                        messages.append({"role": "assistant", "content": "".join(answer)})
                        if not rec.ok:
                            reason = f"turn {k + 1} of this conversation failed"
                        elif k + 1 < phase.turns and phase.think_time_s:
                            await self._sleep_until(self.now() + phase.think_time_s)
                    on_done(rec)
                    out.append(rec)
            return out

        done = await asyncio.gather(*(conversation(c) for c in range(phase.requests)))
        return [rec for conv in done for rec in conv]

    async def _sleep_until(self, due: float) -> None:
        delay = due - self.now()
        if delay > 0:
            with suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), delay)

    async def request(
        self,
        phase: Phase,
        prompt: str | list[dict],
        rec: RequestRecord,
        left_s: float = float("inf"),
        answer: list[str] | None = None,
    ) -> None:
        """Stream one request into `rec`, within its deadline and what is left of the phase's;
        any failure is recorded on it, never raised. `answer`, when given, collects the text."""
        path, body = request_body(phase, self.model, prompt, rec.max_tokens)
        rec.send = self.now()
        deadline = min(phase.request_deadline_s, left_s)
        try:
            async with asyncio.timeout(deadline):
                async with self.session.post(self.base + path, json=body) as resp:
                    rec.status = resp.status
                    if resp.status != 200:
                        rec.error = _error_text(await resp.text())
                    else:
                        await self._read_stream(resp, rec, answer)
        except TimeoutError:
            rec.error = (
                request_deadline(phase)
                if deadline == phase.request_deadline_s
                else phase_deadline(phase)
            )
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:500]
        rec.end = self.now()

    async def _read_stream(
        self, resp: aiohttp.ClientResponse, rec: RequestRecord, answer: list[str] | None = None
    ) -> None:
        last, done = None, False
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            now = self.now()
            event = _event(data)
            if "error" in event:
                rec.error = _error_text(json.dumps(event))
                return
            rec.response_id = rec.response_id or event.get("id")
            if isinstance(event.get("usage"), dict):
                usage = event["usage"]
                rec.output_tokens = usage.get("completion_tokens")
                rec.usage_prompt_tokens = usage.get("prompt_tokens")
                details = usage.get("prompt_tokens_details")
                if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                    rec.cached_tokens = details["cached_tokens"]
            for choice in event.get("choices") or []:
                delta = choice.get("delta")
                text = choice.get("text") or (
                    delta.get("content") if isinstance(delta, dict) else None
                )
                if text:
                    if answer is not None:
                        answer.append(text)
                    if last is None:
                        rec.first_token = now
                    else:
                        rec.itl_s.append(now - last)
                    last = now
                    rec.client_tokens += 1
                    if rec.client_tokens > rec.max_tokens:  # each chunk holds >= 1 token
                        rec.error = f"{OVER_LONG}: more than max_tokens ({rec.max_tokens}) chunks"
                        return
                rec.finish_reason = choice.get("finish_reason") or rec.finish_reason
        if rec.finish_reason is None:  # every complete OpenAI stream ends with one
            rec.error = "stream cut off: no finish_reason" + ("" if done else " and no [DONE]")
        elif rec.finish_reason in FAILED_FINISH:
            rec.error = f"stream ended with finish_reason {rec.finish_reason!r}"


OVER_LONG = "stream too long"
DEADLINE = "deadline"


def request_deadline(phase: Phase) -> str:
    return f"request {DEADLINE} ({phase.request_deadline_s:g} s) passed before the stream finished"


def phase_deadline(phase: Phase) -> str:
    return f"phase {DEADLINE} ({phase.phase_timeout_s:g} s) passed"


def _event(data: bytes) -> dict:
    """One `data:` payload as an OpenAI chunk: an object whose choices are objects."""
    try:
        event = json.loads(data)
    except ValueError:
        raise StreamError(f"stream event is not JSON: {data[:80]!r}") from None
    if not isinstance(event, dict):
        raise StreamError(f"stream event is not a JSON object: {data[:80]!r}")
    choices = event.get("choices")
    if choices is not None and not (
        isinstance(choices, list) and all(isinstance(c, dict) for c in choices)
    ):
        raise StreamError(f"stream event's choices is not a list of objects: {data[:80]!r}")
    return event


def _error_text(body: str) -> str:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body
    return str(message).strip()[:500]
