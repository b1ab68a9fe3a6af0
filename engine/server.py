"""aiohttp server: HTTP, JSON and SSE only. Parses, validates, tokenizes, enqueues, streams."""

import asyncio
import json
import logging
import os
import signal

from aiohttp import web

from engine import __version__
from engine.config import EngineConfig
from engine.engine import Engine
from engine.memory import peak_rss_bytes, reset_peak_rss, rss_bytes
from engine.metrics import EngineMetrics
from engine.protocol import ApiError, chunk, completion_id, full_response, parse_request, usage
from engine.provenance import source_commit
from engine.sequence import Event, Sequence

log = logging.getLogger("engine.server")
ENGINE, METRICS = web.AppKey("engine", Engine), web.AppKey("metrics", EngineMetrics)
CONFIG = web.AppKey("config", EngineConfig)
DISCONNECT_POLL_S = 0.25


def error_response(e: ApiError, headers: dict | None = None) -> web.Response:
    return web.json_response(e.body(), status=e.status, headers=headers)


@web.middleware
async def errors(request: web.Request, handler):
    try:
        return await handler(request)
    except ApiError as e:
        return error_response(e)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        kind = "invalid_request_error" if e.status < 500 else "server_error"
        keep = {k: v for k, v in e.headers.items() if k.lower() in ("retry-after", "allow")}
        return error_response(ApiError(e.status, e.text or e.reason, type_=kind), keep)
    except Exception as e:  # a bug must still answer in the API's shape
        log.exception("unhandled error on %s", request.path)
        return error_response(ApiError(500, f"{type(e).__name__}: {e}", type_="server_error"))


@web.middleware
async def auth(request: web.Request, handler):
    key = request.app[CONFIG].api_key
    authorized = request.headers.get("Authorization", "") == f"Bearer {key}"
    if key and request.path.startswith("/v1/") and not authorized:
        raise ApiError(
            401,
            "missing or wrong API key",
            type_="authentication_error",
            code="invalid_api_key",
        )
    return await handler(request)


def ready_engine(request: web.Request) -> Engine:
    engine = request.app[ENGINE]
    if not engine.ready:
        raise ApiError(503, "the model is still loading", type_="server_error")
    return engine


async def health(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    if not engine.ready:
        return web.json_response({"status": "loading"}, status=503)
    return web.json_response(
        {"status": "ok", **engine.describe(), "version": __version__, **source_commit()}
    )


async def models(request: web.Request) -> web.Response:
    engine = ready_engine(request)
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": engine.model_name,
                    "object": "model",
                    "owned_by": "servegate",
                    "max_model_len": engine.ctx_size,
                }
            ],
        }
    )


async def read_json(request: web.Request) -> object:
    try:
        return json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "the request body is not valid JSON") from None


async def tokenize(request: web.Request) -> web.Response:
    engine, body = ready_engine(request), await read_json(request)
    if isinstance(body, dict) and "messages" in body:
        ids = engine.encode(parse_request(body, chat=True))
    elif isinstance(body, dict) and isinstance(body.get("prompt"), str):
        ids = engine.tokenizer.encode(body["prompt"])
    else:
        raise ApiError(400, "send {'prompt': str} or {'messages': [...]}", "prompt")
    return web.json_response({"tokens": ids, "count": len(ids), "max_model_len": engine.ctx_size})


async def detokenize(request: web.Request) -> web.Response:
    engine, body = ready_engine(request), await read_json(request)
    tokens = body.get("tokens") if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise ApiError(400, "send {'tokens': [int, ...]}", "tokens")
    if any(not 0 <= t < engine.tokenizer.vocab_size for t in tokens):
        raise ApiError(400, "token id out of the vocabulary", "tokens")
    return web.json_response({"prompt": engine.tokenizer.decode(tokens)})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(
        body=request.app[METRICS].render(), content_type="text/plain", charset="utf-8"
    )


def memory_body(engine: Engine) -> dict:
    dev = engine.backend.device_memory() if engine.ready else None
    return {
        "rss_bytes": rss_bytes(),
        "peak_rss_bytes": peak_rss_bytes(),
        "device_active_bytes": dev.active_bytes if dev else None,
        "device_peak_bytes": dev.peak_bytes if dev else None,
    }


async def memory(request: web.Request) -> web.Response:
    return web.json_response(memory_body(request.app[ENGINE]))


async def memory_reset(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    reset_peak_rss()
    if engine.ready:
        engine.backend.reset_device_peak()
    return web.json_response(memory_body(engine))


async def cache_stats(request: web.Request) -> web.Response:
    engine = ready_engine(request)
    cache = engine.scheduler.cache
    return web.json_response({"enabled": cache is not None, **(cache.stats() if cache else {})})


async def completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, chat=True)


async def generate(request: web.Request, chat: bool) -> web.StreamResponse:
    m = request.app[METRICS]
    try:
        engine = ready_engine(request)
        req = parse_request(await read_json(request), chat)
        seq = engine.make_sequence(req)
    except ApiError as e:
        m.requests.labels("client_error" if e.status < 500 else "rejected").inc()
        raise
    loop, events = asyncio.get_running_loop(), asyncio.Queue()

    def emit(_seq: Sequence, event: Event) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    if not engine.scheduler.submit(seq, emit):
        m.requests.labels("rejected").inc()
        return error_response(
            ApiError(
                503,
                "the server is overloaded: retry later",
                type_="server_error",
                code="overloaded",
            ),
            {"Retry-After": "1"},
        )
    stream, finish = Responder(request, seq, req, engine, chat), "error"
    try:
        finish = await stream.run(events)
    except (ConnectionResetError, asyncio.CancelledError):
        finish = "cancelled"
        raise
    finally:
        if finish == "cancelled" or seq.finish_reason is None:
            engine.scheduler.cancel(seq)
        m.requests.labels(
            {"stop": "ok", "length": "ok", "cancelled": "cancelled"}.get(finish, "error")
        ).inc()
    return stream.response


class Responder:
    """Writes one request's events as SSE chunks or one JSON body; notices disconnects."""

    def __init__(self, request, seq: Sequence, req, engine: Engine, chat: bool):
        self.request, self.seq, self.req, self.engine, self.chat = request, seq, req, engine, chat
        self.rid, self.response = completion_id(chat), None

    def _chunk(self, text, finish, role=False) -> dict:
        return chunk(self.rid, self.engine.model_name, self.chat, text, finish, role)

    async def _send(self, payload: dict | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        await self.response.write(f"data: {data}\n\n".encode())

    async def _next(self, events: asyncio.Queue) -> Event | None:
        while True:
            try:
                return await asyncio.wait_for(events.get(), DISCONNECT_POLL_S)
            except TimeoutError:
                transport = self.request.transport
                if transport is None or transport.is_closing():
                    return None

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


def build_app(config: EngineConfig) -> web.Application:
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[errors, auth])
    metrics_ = EngineMetrics()
    app[CONFIG], app[METRICS] = config, metrics_
    app[ENGINE] = Engine(config, metrics_)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    app.router.add_get("/v1/memory", memory)
    app.router.add_post("/v1/memory/reset", memory_reset)
    app.router.add_get("/v1/cache/stats", cache_stats)
    app.on_startup.append(start_loading)
    app.on_shutdown.append(drain)
    return app


async def start_loading(app: web.Application) -> None:
    async def load():
        try:
            await asyncio.to_thread(app[ENGINE].load)
        except Exception as e:
            log.error("engine: could not load the model: %s", e)
            app[ENGINE].load_error = str(e)
            os.kill(os.getpid(), signal.SIGTERM)

    app["loader"] = asyncio.create_task(load())


async def drain(app: web.Application) -> None:
    """SIGTERM: the listener is closed; give in-flight work a moment, then cancel the rest."""
    engine = app[ENGINE]
    if engine.ready:
        await engine.drain(app[CONFIG].drain_seconds)
