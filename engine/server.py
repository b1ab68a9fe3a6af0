"""aiohttp server: routes and handlers. Parses, validates, tokenizes (off the loop), enqueues."""

import asyncio
import contextlib
import json
import logging
import os
import signal
import threading

from aiohttp import web

from engine import __version__
from engine.config import EngineConfig
from engine.engine import Engine
from engine.guards import CONFIG, METRICS, auth, errors, expect_continue, read_json
from engine.memory import peak_rss_bytes, reset_peak_rss, rss_bytes
from engine.metrics import EngineMetrics
from engine.protocol import ApiError, GenerationRequest, parse_request, text
from engine.provenance import source_commit
from engine.responder import Responder, error_response
from engine.sequence import Event, Sequence

log = logging.getLogger("engine.server")
ENGINE = web.AppKey("engine", Engine)
JSON_SLICE = 65536  # list items serialized per slice: a huge /tokenize answer yields the GIL


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


def _dumps_list(head: dict, key: str, items: list) -> bytes:
    """json.dumps({**head, key: items}) in slices, for a worker thread that must share the GIL."""
    parts = [json.dumps(items[i : i + JSON_SLICE])[1:-1] for i in range(0, len(items), JSON_SLICE)]
    return (json.dumps(head)[:-1] + f', "{key}": [' + ", ".join(parts) + "]}").encode()


async def tokenize(request: web.Request) -> web.Response:
    engine, body = ready_engine(request), await read_json(request)
    if isinstance(body, dict) and "messages" in body:
        ids = await asyncio.to_thread(engine.encode, parse_request(body, chat=True))
    elif isinstance(body, dict) and isinstance(body.get("prompt"), str):
        ids = await asyncio.to_thread(engine.tokenizer.encode, text(body["prompt"], "prompt"))
    else:
        raise ApiError(400, "send {'prompt': str} or {'messages': [...]}", "prompt")
    head = {"count": len(ids), "max_model_len": engine.ctx_size}
    data = await asyncio.to_thread(_dumps_list, head, "tokens", ids)
    return web.Response(body=data, content_type="application/json")


async def detokenize(request: web.Request) -> web.Response:
    engine, body = ready_engine(request), await read_json(request)
    tokens = body.get("tokens") if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise ApiError(400, "send {'tokens': [int, ...]}", "tokens")
    if any(not 0 <= t < engine.tokenizer.vocab_size for t in tokens):
        raise ApiError(400, "token id out of the vocabulary", "tokens")
    return web.json_response({"prompt": await asyncio.to_thread(engine.tokenizer.decode, tokens)})


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


def _poisoned(req: GenerationRequest, marker: str | None) -> bool:
    """Test-only fault injection (ENGINE_TEST_FAULT_MARKER): see docs/engine.md."""
    if not marker:
        return False
    texts = [m["content"] for m in req.messages] if req.chat else [req.prompt]
    return any(isinstance(t, str) and marker in t for t in texts)


async def generate(request: web.Request, chat: bool) -> web.StreamResponse:
    m, engine = request.app[METRICS], ready_engine(request)
    req = parse_request(await read_json(request), chat)
    seq = await asyncio.to_thread(engine.make_sequence, req)  # tokenizing and templating
    seq.sampler.fault = _poisoned(req, request.app[CONFIG].test_fault_marker)
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
    except ConnectionResetError:  # the client went away mid-stream: not an engine error
        finish = "cancelled"
        log.info("client disconnected from %s after %d tokens", request.path, len(seq.output))
    except asyncio.CancelledError:
        finish = "cancelled"
        raise
    finally:
        if finish == "cancelled" or seq.finish_reason is None:
            engine.scheduler.cancel(seq)
        m.requests.labels(
            {"stop": "ok", "length": "ok", "cancelled": "cancelled"}.get(finish, "error")
        ).inc()
    # a non-streaming client that left has no response: answer nginx's 499 to the closed socket
    return stream.response or web.Response(status=499, reason="Client Closed Request")


def build_app(config: EngineConfig) -> web.Application:
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[errors, auth])
    metrics_ = EngineMetrics()
    app[CONFIG], app[METRICS] = config, metrics_
    app[ENGINE] = Engine(config, metrics_)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions, expect_handler=expect_continue)
    app.router.add_post("/v1/chat/completions", chat_completions, expect_handler=expect_continue)
    app.router.add_post("/tokenize", tokenize, expect_handler=expect_continue)
    app.router.add_post("/detokenize", detokenize, expect_handler=expect_continue)
    app.router.add_get("/v1/memory", memory)
    app.router.add_post("/v1/memory/reset", memory_reset, expect_handler=expect_continue)
    app.router.add_get("/v1/cache/stats", cache_stats)
    app.on_startup.append(start_loading)
    app.on_shutdown.append(drain)
    return app


async def start_loading(app: web.Application) -> None:
    """Load on the compute thread, which then runs the scheduler (Engine.load_and_run)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def loaded(error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed first: nothing to tell
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(error))

    name = "engine-compute"
    threading.Thread(
        target=app[ENGINE].load_and_run, args=(loaded,), name=name, daemon=True
    ).start()

    async def load():
        error = await done
        if error is not None:
            log.error("engine: could not load the model: %s", error)
            app[ENGINE].load_error = str(error)
            os.kill(os.getpid(), signal.SIGTERM)

    app["loader"] = asyncio.create_task(load())


async def drain(app: web.Application) -> None:
    """SIGTERM: the listener is closed; give in-flight work a moment, then cancel the rest."""
    engine = app[ENGINE]
    if engine.ready:
        await engine.drain(app[CONFIG].drain_seconds)
