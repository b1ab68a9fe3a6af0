"""One streamed OpenAI response: its SSE events parsed into the request's record (tokens, the
time and token count of each read, their gaps, usage, finish reason, errors), a read at a time
as they come, or after the stream from the reads kept raw (`parse`: the reading loop only
stamps and keeps the bytes, so it is free for the other streams' reads)."""

from __future__ import annotations

import hashlib
import json

from harness.load.record import RequestRecord

OVER_LONG = "stream too long"
FAILED_FINISH = ("error", "cancelled")  # a stream the server ended this way did not complete


class StreamError(ValueError):
    """A stream event that is not an OpenAI chunk; the request is recorded as failed."""


class Stream:
    """One response's SSE events, fed a read at a time."""

    def __init__(self, rec: RequestRecord, answer: list[str] | None) -> None:
        self.rec, self.answer, self.done = rec, answer, False
        self.last: float | None = None  # the read time of the stream's latest token
        self.text = hashlib.sha256()
        self.pending = b""  # a line the reads so far have not finished

    def feed(self, now: float, data: bytes) -> None:
        """One read's bytes: each line it completes is an event stamped with its time."""
        *lines, self.pending = (self.pending + data).split(b"\n")
        self.read(now, lines)

    def flush(self, now: float) -> None:
        """The stream ended: a last line without its newline is read too."""
        if self.pending.strip():
            self.read(now, [self.pending])
        self.pending = b""

    def read(self, now: float, lines: list[bytes]) -> None:
        rec, tokens = self.rec, 0
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.done = True
                break
            event = _event(data)
            if "error" in event:
                rec.error = error_text(json.dumps(event))
                return
            rec.response_id = rec.response_id or event.get("id")
            if isinstance(event.get("usage"), dict):
                _usage(rec, event["usage"])
            for choice in event.get("choices") or []:
                delta = choice.get("delta")
                text = choice.get("text") or (
                    delta.get("content") if isinstance(delta, dict) else None
                )
                if text:
                    if self.answer is not None:
                        self.answer.append(text)
                    self.text.update(str(text).encode())
                    tokens += 1
                    rec.client_tokens += 1
                    if rec.client_tokens > rec.max_tokens:  # each chunk holds >= 1 token
                        rec.error = f"{OVER_LONG}: more than max_tokens ({rec.max_tokens}) chunks"
                        return
                rec.finish_reason = choice.get("finish_reason") or rec.finish_reason
        if not tokens:
            return
        rec.output_sha256 = self.text.hexdigest()
        if tokens > 1:
            rec.coalesced += tokens
        rec.reads.append((now, tokens))
        if self.last is None:
            rec.first_token = now  # the tokens that came with the first one have no gap
        else:
            rec.itl_s.extend([(now - self.last) / tokens] * tokens)
        self.last = now


def parse(rec: RequestRecord, chunks: list[tuple[float, bytes]], complete: bool = True) -> None:
    """The record of a stream from its reads (time, bytes) as they came: each event stamped
    with the time of the read that completed its line, as if parsed then. `complete`: read to
    its end (else cut short on purpose or by a failure already recorded)."""
    stream = Stream(rec, None)
    try:
        for now, data in chunks:
            stream.feed(now, data)
            if stream.done or rec.error:
                break
        else:
            if chunks:
                stream.flush(chunks[-1][0])
    except StreamError as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:500]
    if complete:
        ended(rec, stream)


def ended(rec: RequestRecord, stream: Stream) -> None:
    """What the end of a read stream says: cut off before a finish_reason, or finished as a
    failure (a stream already in error keeps its error)."""
    if rec.error:
        return
    if rec.finish_reason is None:  # every complete OpenAI stream ends with one
        cut = "" if stream.done else " and no [DONE]"
        rec.error = f"stream cut off: no finish_reason{cut}"
    elif rec.finish_reason in FAILED_FINISH:
        rec.error = f"stream ended with finish_reason {rec.finish_reason!r}"


def _usage(rec: RequestRecord, usage: dict) -> None:
    """The counts a usage block gives, where each is a whole number (anything else, as absent:
    the client's own count stands)."""
    rec.output_tokens = _count(usage.get("completion_tokens"))
    rec.usage_prompt_tokens = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        rec.cached_tokens = _count(details.get("cached_tokens"))


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


def error_text(body: str) -> str:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body
    return str(message).strip()[:500]
