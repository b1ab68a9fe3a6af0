"""One streamed OpenAI response, read a read at a time: its SSE events parsed into the request's
record (tokens, their read times and gaps, usage, finish reason, errors)."""

from __future__ import annotations

import hashlib
import json

from harness.load.record import RequestRecord

OVER_LONG = "stream too long"


class StreamError(ValueError):
    """A stream event that is not an OpenAI chunk; the request is recorded as failed."""


class Stream:
    """One response's SSE events, fed a read at a time."""

    def __init__(self, rec: RequestRecord, answer: list[str] | None) -> None:
        self.rec, self.answer, self.done = rec, answer, False
        self.last: float | None = None  # the read time of the stream's latest token
        self.text = hashlib.sha256()

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
        if self.last is None:
            rec.first_token = now  # the tokens that came with the first one have no gap
        else:
            rec.itl_s.extend([(now - self.last) / tokens] * tokens)
        self.last = now


def _usage(rec: RequestRecord, usage: dict) -> None:
    rec.output_tokens = usage.get("completion_tokens")
    rec.usage_prompt_tokens = usage.get("prompt_tokens")
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        rec.cached_tokens = details["cached_tokens"]


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
