"""A server that sends without end, never finishes an answer, or reports numbers that cannot be
true: every read the harness makes of it ends within its cap and deadline, and what it reports
is refused, not believed (a real aiohttp server on loopback, misbehaving on purpose)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from harness.arms.launcher import probe
from harness.load import server_reads
from harness.load.counters import MetricsEndpoint, Snapshot
from harness.load.gauges import GaugeWatch
from harness.load.load import LoadDriver, make_session, stream_cap
from harness.load.memory_peaks import MemoryEndpoint
from harness.load.record import RequestRecord
from harness.load.stream import OVER_LONG, parse
from harness.runs.measure import served_model
from harness.workload.phase import Phase


async def endless(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    line = b"x" * 65536
    while True:  # until the client goes
        await resp.write(line)


async def silent(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    await asyncio.sleep(3600)
    return resp


async def endless_comments(request: web.Request) -> web.StreamResponse:
    """An SSE stream that never sends a token, a finish or [DONE]: only comment lines."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    while True:
        await resp.write(b": keep-alive " + b"." * 8000 + b"\n\n")


def json_answer(body: object):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=body if isinstance(body, str) else json.dumps(body))

    return handler


def url(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


async def serve(routes: list[tuple[str, str, object]]) -> TestServer:
    app = web.Application()
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


def test_metrics_that_never_end_or_never_come_fail_the_scrape_within_its_deadline(monkeypatch):
    monkeypatch.setattr(server_reads, "DEADLINE_S", 1.0)

    async def main():
        for handler, said in ((endless, "sent more than"), (silent, "did not answer within")):
            server = await serve([("GET", "/metrics", handler)])
            async with make_session() as session:
                endpoint = MetricsEndpoint(session, url(server))
                t0 = time.monotonic()
                snap = await endpoint.scrape()
                took = time.monotonic() - t0
            await server.close()
            assert not snap.ok and said in snap.error and not endpoint.available, snap.error
            assert took < 30  # capped at 16 MiB or at the 1 s deadline: never memory, never hung

    asyncio.run(main())


def test_a_health_answer_without_end_is_no_answer_within_the_probe_timeout():
    async def main():
        server = await serve([("GET", "/health", endless), ("GET", "/slow", silent)])
        base = url(server)
        t0 = time.monotonic()
        endless_said = await asyncio.to_thread(probe, base + "/health", 1.0)
        silent_said = await asyncio.to_thread(probe, base + "/slow", 1.0)
        took = time.monotonic() - t0
        await server.close()
        return endless_said, silent_said, took

    endless_said, silent_said, took = asyncio.run(main())
    assert endless_said == (0, {}) and silent_said == (0, {})
    assert took < 30  # each cut at its cap or its second


@pytest.mark.parametrize(
    "answer",
    [
        '{"peak_rss_bytes": NaN}',
        '{"peak_rss_bytes": Infinity}',
        '{"peak_rss_bytes": -5}',
        '{"peak_rss_bytes": 1e308}',
        '{"peak_rss_bytes": "abc"}',
        '{"peak_rss_bytes": true}',
        "[1, 2]",
        "[" * 100_000,
    ],  # fmt: skip
)
def test_memory_figures_that_cannot_be_bytes_are_unmeasured(answer):
    async def main():
        server = await serve([("GET", "/v1/memory", json_answer(answer))])
        async with make_session() as session:
            memory = await MemoryEndpoint(session, url(server)).read()
        await server.close()
        return memory

    memory = asyncio.run(main())
    assert memory is None or memory.peak_rss_bytes is None


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 1e308])
def test_a_gauge_that_cannot_be_bytes_leaves_the_phase_unmeasured(value):
    watch = GaugeWatch(endpoint=None, names=("vram_bytes",))
    watch.take(Snapshot(values={"vram_bytes": 2e9}, names={"vram_bytes"}))
    assert watch.peak == 2e9
    watch.take(Snapshot(values={"vram_bytes": value}, names={"vram_bytes"}))
    watch.take(Snapshot(values={"vram_bytes": 3e9}, names={"vram_bytes"}))
    assert watch.peak is None and "not a byte count" in watch.refused
    watch.reset()
    assert watch.peak is None and not watch.refused


@pytest.mark.parametrize("claimed", [10**18, -5, 3, "abc", None, 9])
def test_usage_is_believed_only_where_it_can_be_true(claimed):
    chunks = [b'data: {"choices": [{"index": 0, "text": "t", "finish_reason": null}]}\n\n'] * 8
    usage = {"completion_tokens": claimed}
    chunks += [b'data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],'
               b' "usage": ' + json.dumps(usage).encode() + b"}\n\ndata: [DONE]\n\n"]  # fmt: skip
    rec = RequestRecord("p", 0, 8, 12)
    parse(rec, [(0.01 * i, c) for i, c in enumerate(chunks)])
    assert rec.client_tokens == 8
    assert rec.tokens == (9 if claimed == 9 else 8)  # believed only from 8 chunks to max_tokens
    assert rec.token_mismatch == (isinstance(claimed, int) and claimed != 8)


def test_a_stream_that_never_ends_is_cut_at_its_cap_and_fails_the_run():
    async def main():
        server = await serve([("POST", "/v1/completions", endless_comments)])
        async with make_session() as session:
            driver = LoadDriver(session, url(server), "m", time.perf_counter())
            phase = Phase("p", max_tokens=4)
            rec = RequestRecord("p", 0, 8, 4)
            t0 = time.monotonic()
            await driver.request(phase, "hello", rec)
            took = time.monotonic() - t0
        await server.close()
        return rec, took

    rec, took = asyncio.run(main())
    assert rec.error.startswith(OVER_LONG) and f"{stream_cap(4) >> 10} KiB" in rec.error
    assert not rec.ok and took < 30


def test_a_model_list_nested_past_any_parser_is_no_model_list():
    async def main():
        server = await serve([("GET", "/v1/models", json_answer("[" * 200_000))])
        async with make_session() as session:
            got = await served_model(session, url(server), "wanted")
        await server.close()
        return got

    assert asyncio.run(main()) == "wanted"


def test_an_error_body_without_end_is_cut_to_a_line():
    async def main():
        async def refuse(request):
            resp = web.StreamResponse(status=400)
            await resp.prepare(request)
            while True:
                await resp.write(b"y" * 65536)

        server = await serve([("POST", "/v1/completions", refuse)])
        async with make_session() as session:
            driver = LoadDriver(session, url(server), "m", time.perf_counter())
            rec = RequestRecord("p", 0, 8, 4)
            await driver.request(Phase("p", max_tokens=4), "hello", rec)
        await server.close()
        return rec

    rec = asyncio.run(main())
    assert rec.status == 400 and not rec.ok and "sent more than 64 KiB" in rec.error
    assert len(rec.error) < 600
