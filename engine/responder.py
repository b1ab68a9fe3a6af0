"""Responder: writes one request's scheduler events as SSE chunks or one JSON body."""

import asyncio
import contextlib
import json

from aiohttp import web

from engine.engine import Engine
from engine.protocol import ApiError, GenerationRequest, chunk, completion_id, full_response, usage
from engine.sequence import Event, Sequence

DISCONNECT_POLL_S = 0.25


def error_response(e: ApiError, headers: dict | None = None) -> web.Response:
    return web.json_response(e.body(), status=e.status, headers=headers)


class Responder:
    """Streams or collects one sequence's events; notices a client that went away."""

    def __init__(self, request, seq: Sequence, req: GenerationRequest, engine: Engine, chat: bool):
        self.request, self.seq, self.req, self.engine, self.chat = request, seq, req, engine, chat
        self.rid, self.response = completion_id(chat), None

    def _chunk(self, text, finish, role=False) -> dict:
        return chunk(self.rid, self.engine.model_name, self.chat, text, finish, role)

    async def _send(self, payload: dict | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        await self.response.write(f"data: {data}\n\n".encode())

    async def _next(self, events: asyncio.Queue) -> Event | None:
        """The next event, or None once the client is gone (checked before every event too:
        a sequence that emits a token every few ms would otherwise never hit the poll)."""
        while True:
            transport = self.request.transport
            if transport is None or transport.is_closing():
                return None
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(events.get(), DISCONNECT_POLL_S)

    async def run(self, events: asyncio.Queue) -> str:
        if self.req.stream:
            self.response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await self.response.prepare(self.request)
            if self.chat:
                await self._send(self._chunk(None, None, role=True))
        text = []
        while True:
            event = await self._next(events)
            if event is None:
                return "cancelled"
            if self.req.stream and (event.text or event.finish_reason):
                await self._send(self._chunk(event.text, event.finish_reason))
            text.append(event.text)
            if event.finish_reason:
                break
        use = usage(len(self.seq.prompt), len(self.seq.output), self.seq.cached_tokens)
        if event.finish_reason in ("error", "cancelled") and not self.req.stream:
            msg = event.error or "the request was cancelled"
            self.response = error_response(ApiError(500, msg, type_="server_error"))
            return event.finish_reason
        if self.req.stream:
            if self.req.include_usage:
                await self._send({**self._chunk(None, None), "choices": [], "usage": use})
            await self._send("[DONE]")
            await self.response.write_eof()
        else:
            self.response = web.json_response(
                full_response(
                    self.rid,
                    self.engine.model_name,
                    self.chat,
                    "".join(text),
                    event.finish_reason,
                    use,
                )
            )
        return event.finish_reason
