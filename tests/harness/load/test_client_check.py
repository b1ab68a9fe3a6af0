"""The client's own check: a blocked event loop is seen as lag, the bound is a pure rule, and
tokens that come in one read keep their pace in ITL (a real aiohttp server, in process, that
writes three tokens in one write after a pause)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from harness.load.client_check import LagProbe, client_fell_behind, client_summary, lag_bound_ms
from harness.load.load import LoadDriver, make_session
from harness.load.record import RequestRecord
from harness.workload.suite import Phase


def test_a_blocked_loop_is_seen_as_lag():
    async def main() -> LagProbe:
        probe = LagProbe()
        probe.start()
        await asyncio.sleep(0.02)
        for _ in range(3):
            time.sleep(0.06)  # the loop parses nothing else meanwhile: every read waits
            await asyncio.sleep(0.01)
        probe.stop()
        return probe

    probe = asyncio.run(main())
    summary = client_summary([probe], tokens=10, coalesced=4)
    assert summary["lag_max_ms"] >= 55 and summary["wakeups"] >= 3
    assert summary["coalesced_share"] == 0.4
    assert summary["cpu_share"] < 0.5  # time.sleep costs the thread no CPU


def test_the_bound_follows_the_token_gap_above_a_floor():
    assert lag_bound_ms(None) == lag_bound_ms(1.0) == 5.0
    assert lag_bound_ms(80.0) == 20.0
    quiet = {"lag_p50_ms": 0.2, "lag_p95_ms": 30.0, "cpu_share": 0.1}  # preempted a few times
    behind = {"lag_p50_ms": 15.9, "lag_p95_ms": 40.0, "cpu_share": 0.97}
    assert client_fell_behind("main", quiet, 1.0) is None
    assert client_fell_behind("main", {}, 1.0) is None  # a simulated run measures no client
    line = client_fell_behind("main", behind, 1.0)
    assert line.startswith("phase 'main': the client fell behind: its event loop woke 15.9 ms late")
    assert "bound is 5.0 ms" in line and "busy 97%" in line and "more client processes" in line
    assert client_fell_behind("main", behind, 80.0) is None  # 16 ms of 80 ms gaps


def chunk(text: str | None, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text or "", "finish_reason": finish}
    return b"data: " + json.dumps({"id": "c1", "choices": [choice]}).encode() + b"\n\n"


async def three_at_once(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(chunk("a"))
    await asyncio.sleep(0.3)
    await resp.write(chunk("b") + chunk("c") + chunk("d"))  # three tokens, one write
    await asyncio.sleep(0.05)
    await resp.write(chunk(None, "length") + b"data: [DONE]\n\n")
    return resp


def test_tokens_that_come_in_one_read_keep_their_pace():
    async def main() -> RequestRecord:
        app = web.Application()
        app.router.add_post("/v1/completions", three_at_once)
        async with TestServer(app) as server, make_session() as session:
            driver = LoadDriver(session, str(server.make_url("")).rstrip("/"), "m", 0.0)
            rec = RequestRecord("p", 0, 8, 16)
            await driver.request(Phase("p", max_tokens=16), "hi", rec)
            return rec

    rec = asyncio.run(main())
    assert rec.ok and rec.client_tokens == 4 and rec.coalesced == 3
    assert len(rec.itl_s) == 3 and len(set(rec.itl_s)) == 1  # one read's time, split in three
    assert sum(rec.itl_s) >= 0.29  # the pause they came after, not three gaps of zero
    assert rec.itl_s[0] == pytest.approx(sum(rec.itl_s) / 3)
