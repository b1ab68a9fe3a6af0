"""A stream's reads parsed after it ended give the record parsing them as they came gives:
each event stamped with the read that completed its line, tokens per read, errors, the end."""

from __future__ import annotations

import json

from harness.load.load import finish
from harness.load.record import RequestRecord
from harness.load.stream import Stream, StreamError, ended, parse


def event(text: str | None = None, finish_reason: str | None = None, **extra) -> bytes:
    choice = {"index": 0, "text": text or "", "finish_reason": finish_reason}
    return b"data: " + json.dumps({"id": "c1", "choices": [choice], **extra}).encode() + b"\n\n"


def as_read(chunks: list[tuple[float, bytes]]) -> RequestRecord:
    """The record as the reading loop builds it, a read at a time (a malformed event raised
    there is recorded by the request that read it)."""
    rec, pending = RequestRecord("p", 0, 8, 16), b""
    stream = Stream(rec, None)
    try:
        for now, data in chunks:
            *lines, pending = (pending + data).split(b"\n")
            stream.read(now, lines)
            if stream.done or rec.error:
                break
    except StreamError as exc:
        rec.error = f"{type(exc).__name__}: {exc}"
        return rec
    ended(rec, stream)
    return rec


def after(chunks: list[tuple[float, bytes]]) -> RequestRecord:
    rec = RequestRecord("p", 0, 8, 16)
    parse(rec, chunks)
    return rec


def test_parsed_after_is_parsed_as_read():
    body = event("") + event("a") + event("b") + event("c") + event(None, "length")
    body += b'data: {"id": "c1", "choices": [], "usage": {"completion_tokens": 3}}\n\n'
    body += b"data: [DONE]\n\n"
    cut = [0, 9, len(event("")) + 3, 200, 201, len(body) - 5, len(body)]  # lines split anywhere
    chunks = [(0.1 * i, body[a:b]) for i, (a, b) in enumerate(zip(cut, cut[1:], strict=False))]
    read, parsed = as_read(chunks), after(chunks)
    assert read == parsed
    assert parsed.ok is False and parsed.status == 0  # no HTTP status here: the stream only
    assert (parsed.client_tokens, parsed.output_tokens, parsed.finish_reason) == (3, 3, "length")
    assert parsed.reads and sum(k for _, k in parsed.reads) == 3
    assert parsed.first_token == parsed.reads[0][0]


def test_an_error_event_or_a_cut_stream_reads_the_same_either_way():
    for body in (event("a") + b'data: {"error": {"message": "boom"}}\n\n',
                 event("a") + event("b"),  # cut: no finish_reason, no [DONE]
                 event("a") + b"data: not json\n\n"):  # fmt: skip
        chunks = [(0.0, body[:7]), (0.5, body[7:])]
        parsed = after(chunks)
        assert as_read(chunks) == parsed and parsed.error and parsed.client_tokens >= 1


def test_a_stream_cut_short_keeps_its_outcome_and_its_tokens():
    rec = RequestRecord("p", 0, 8, 16, error="request deadline (3 s) passed")
    rec.raw = [(0.2, event("a")), (0.4, event("b"))]
    finish(rec)
    assert rec.error == "request deadline (3 s) passed" and rec.client_tokens == 2
    assert rec.raw is None and rec.reads == [(0.2, 1), (0.4, 1)]
    cancelled = RequestRecord("p", 1, 8, 16, cancelled=True)
    cancelled.raw = [(0.2, event("a"))]
    finish(cancelled)
    assert cancelled.error == "" and cancelled.client_tokens == 1  # not "cut off": on purpose
