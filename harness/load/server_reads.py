"""The one door for what the harness reads from a server besides its streams: `/metrics`,
`/v1/models`, `/v1/memory`, `/tokenize` and an error's body. Each read has a size cap and a
total deadline, as Prometheus caps a scrape (`body_size_limit`, `scrape_timeout`); past
either it fails as an unparsable answer does, never with the harness's memory or time."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import aiohttp

JSON_CAP = 1 << 20  # a model list, a memory report, a token count: kilobytes
METRICS_CAP = 16 << 20  # Prometheus text of a large server: a few MB
ERROR_CAP = 64 << 10  # an error's body: enough for its message
DEADLINE_S = 10.0  # a whole answer, headers to the last byte
MAX_BYTES = 1 << 50  # a memory figure past a pebibyte is no machine's


class ServerReadError(ValueError):
    """An answer that could not be read whole within the cap and the deadline; one line."""


async def read_body(resp: aiohttp.ClientResponse, cap: int) -> bytes:
    """The body, or ServerReadError when it is longer than `cap` bytes."""
    body = bytearray()
    async for chunk in resp.content.iter_chunked(1 << 16):
        body += chunk
        if len(body) > cap:
            raise ServerReadError(f"{resp.url.path} sent more than {cap >> 10} KiB")
    return bytes(body)


async def fetch(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    cap: int = JSON_CAP,
    deadline_s: float | None = None,
    **kwargs,
) -> tuple[int, bytes]:
    """(HTTP status, body) of one request, read whole within `cap` bytes and `deadline_s`
    (DEADLINE_S unless given)."""
    deadline_s = DEADLINE_S if deadline_s is None else deadline_s
    try:
        async with asyncio.timeout(deadline_s):
            async with session.request(method, url, **kwargs) as resp:
                return resp.status, await read_body(resp, cap)
    except TimeoutError:
        path = url.split("//", 1)[-1].partition("/")[2]
        raise ServerReadError(f"/{path} did not answer within {deadline_s:g} s") from None
    except aiohttp.ClientError as exc:
        raise ServerReadError(str(exc) or type(exc).__name__) from None


async def fetch_json(
    session: aiohttp.ClientSession, method: str, url: str, **kwargs
) -> tuple[int, Any]:
    """(HTTP status, parsed JSON body); ServerReadError when it is not JSON."""
    status, body = await fetch(session, method, url, **kwargs)
    try:
        return status, json.loads(body)
    except (ValueError, RecursionError):  # a body nested past the parser's depth, too
        raise ServerReadError(f"{url} answered with a body that is not JSON") from None


def byte_count(value: object) -> int | None:
    """A memory figure a server reported, if it can be one: a finite number of bytes from 0 to
    a pebibyte (NaN, infinities, negatives, booleans and strings are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or not 0 <= value <= MAX_BYTES:
        return None
    return int(value)
