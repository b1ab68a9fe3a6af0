"""HTTP guards in front of every handler: error shape and counting, auth, bounded body reads."""

import asyncio
import hmac
import json
import logging

from aiohttp import web

from engine.config import EngineConfig
from engine.metrics import EngineMetrics
from engine.protocol import ApiError
from engine.responder import error_response

log = logging.getLogger("engine.server")
CONFIG = web.AppKey("config", EngineConfig)
METRICS = web.AppKey("metrics", EngineMetrics)
OPEN_PATHS = ("/health", "/metrics")  # probes and scrapes; every other endpoint does work


class ClientGone(Exception):
    """The client hung up before its request body arrived: nobody to answer, nothing to fix."""


def _count(request: web.Request, status: int) -> None:
    outcome = "client_error" if status < 500 else "rejected" if status == 503 else "error"
    request.app[METRICS].requests.labels(outcome).inc()


@web.middleware
async def errors(request: web.Request, handler):
    """Every failure answers in the OpenAI error shape; 4xx are counted as client_error."""
    try:
        return await handler(request)
    except ApiError as e:
        _count(request, e.status)
        if e.status != 415:
            return error_response(e)
        # a compressed body is refused unread: answer, then close rather than drain it (the
        # server runs with auto_decompress=False, engine/cli.py: nothing inflates it either)
        resp = error_response(e, {"Connection": "close"})
        await resp.prepare(request)
        await resp.write_eof()
        request.protocol.force_close()
        return resp
    except ClientGone:
        log.info("client left before its request body of %s arrived", request.path)
        request.app[METRICS].requests.labels("cancelled").inc()
        return web.Response(status=400)  # written to nobody
    except web.HTTPException as e:
        if e.status < 400:
            raise
        _count(request, e.status)
        kind = "invalid_request_error" if e.status < 500 else "server_error"
        keep = {k: v for k, v in e.headers.items() if k.lower() in ("retry-after", "allow")}
        return error_response(ApiError(e.status, e.text or e.reason, type_=kind), keep)
    except Exception as e:  # a bug must still answer in the API's shape
        log.exception("unhandled error on %s", request.path)
        _count(request, 500)
        return error_response(ApiError(500, f"{type(e).__name__}: {e}", type_="server_error"))


def _authorized(request: web.Request, key: str) -> bool:
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogatepass")
    return hmac.compare_digest(given, f"Bearer {key}".encode("utf-8", "surrogatepass"))


@web.middleware
async def auth(request: web.Request, handler):
    key = request.app[CONFIG].api_key
    if key and request.path not in OPEN_PATHS and not _authorized(request, key):
        raise ApiError(
            401,
            "missing or wrong API key",
            type_="authentication_error",
            code="invalid_api_key",
        )
    return await handler(request)


def _too_large(request: web.Request) -> ApiError | None:
    limit = request.app[CONFIG].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        return ApiError(413, f"the request body is over {limit} bytes", code="body_too_large")
    return None


async def expect_continue(request: web.Request) -> web.StreamResponse | None:
    """`Expect: 100-continue`: refuse an oversized body before the client sends it."""
    if request.headers.get("Expect", "").lower() != "100-continue":
        _count(request, 417)
        return error_response(ApiError(417, "only 'Expect: 100-continue' is understood"))
    if (e := _too_large(request)) is not None:
        _count(request, e.status)
        return error_response(e, {"Connection": "close"})
    if request.version >= (1, 1):  # as aiohttp's own handler does
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
    return None


async def read_json(request: web.Request) -> object:
    """The body as JSON: 413 when declared too large, 408 when it does not arrive in time, 415
    when it is compressed (the body limit holds for what is sent, and a server that decoded it
    would have to bound what it inflates to as well)."""
    if (e := _too_large(request)) is not None:
        raise e
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise ApiError(
            415,
            f"Content-Encoding {encoding!r} is not supported: send the body uncompressed",
            code="unsupported_content_encoding",
        )
    try:
        raw = await asyncio.wait_for(request.read(), request.app[CONFIG].read_timeout)
    except TimeoutError:
        raise ApiError(408, "the request body did not arrive in time", code="timeout") from None
    except ConnectionResetError:
        raise ClientGone from None
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "the request body's JSON is nested too deeply") from None
    except ValueError as e:  # bad JSON or UTF-8, or an integer over Python's digit limit
        raise ApiError(400, f"the request body is not valid JSON: {e}") from None
