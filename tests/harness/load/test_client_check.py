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

from harness.load.client_check import (
    LagProbe,
    client_fell_behind,
    client_summary,
    lag_bound_ms,
    read_lag_ms,
    token_lags,
)
from harness.load.load import LoadDriver, make_session
from harness.load.phase import PhaseResult
from harness.load.record import RequestRecord
from harness.runs.validity import judge
from harness.workload.phase import Phase


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
    # 180 ms of 60 ms stalls in ~0.25 s: a read arriving then waited ~18 ms at the median,
    # though most wake-ups (the quick ones between) were on time
    assert summary["late_share"] > 0.5 and summary["read_lag_p50_ms"] > 10
    assert summary["lag_p50_ms"] < summary["read_lag_p50_ms"]
    assert summary["coalesced_share"] == 0.4
    assert summary["cpu_share"] < 0.5  # time.sleep costs the thread no CPU


def test_the_read_lag_is_weighted_by_time_not_by_wake_up():
    # one 150 ms stall in a 200 ms window: half the window a read waits more than 50 ms
    assert read_lag_ms([150.0], 200.0, 0.5) == 50.0
    assert read_lag_ms([100.0], 200.0, 0.5) == 0.0  # behind exactly half the time
    # a hundred on-time wake-ups do not hide one long stall (a median of wake-ups would)
    lags = [0.05] * 100 + [300.0]
    assert sorted(lags)[len(lags) // 2] == 0.05
    assert read_lag_ms(lags, 400.0, 0.5) == 100.0  # 300 ms, of which 100 past the window's half
    assert read_lag_ms([0.1] * 1000, 1100.0, 0.5) == 0.0  # a free loop: late 9% of the time
    # p95: the window's last 5% of read lags, from the same stalls
    assert read_lag_ms([40.0, 30.0], 100.0, 0.95) == pytest.approx(35.0)  # 5 ms of 100 past it
    assert read_lag_ms([40.0, 30.0], 100.0, 0.5) == pytest.approx(10.0)  # (70 - 50) / 2
    assert read_lag_ms([], 100.0, 0.5) == 0.0


def test_tokens_that_piled_up_in_a_stall_weigh_as_many_tokens():
    # The writer's messages: due every ms over 100 ms; the loop read each at once (0.1 ms)
    # except in a 20 ms stall from 40 ms, whose messages were all read at 60 ms.
    reads = []
    for ms in range(100):
        due = 10.0 + ms / 1e3
        read = 10.060 if 40 <= ms < 60 else due + 0.0001
        reads.append((due, (read - due) * 1e3))
    probe = LagProbe(reads=reads)
    assert probe.read_lag_ms(0.5) == pytest.approx(0.1)  # over time: 80% of it on time
    # The server wrote while the client waited: 160 tokens came in the read after the stall,
    # 40 as they came, one a read, before and after it.
    on_time = [(10.0 + ms / 1e3 + 0.0001, 1) for ms in (*range(20), *range(80, 100))]
    probe.tokens_at = [*on_time, (10.060, 160)]
    lags = token_lags(reads, probe.tokens_at)
    assert lags[-1] == (pytest.approx(10.5), 160)  # the stall's messages waited 20..1 ms
    assert probe.read_lag_ms(0.5) == pytest.approx(10.5)  # 80% of the tokens met the stall


def test_the_bound_follows_the_token_gap_above_a_floor():
    assert lag_bound_ms(None) == lag_bound_ms(1.0) == 5.0
    assert lag_bound_ms(80.0) == 20.0
    quiet = {"read_lag_p50_ms": 0.0, "late_share": 0.1, "cpu_share": 0.1}  # preempted a few times
    edge = {"read_lag_p50_ms": 5.0, "late_share": 0.52}
    behind = {"read_lag_p50_ms": 15.9, "late_share": 0.8, "cpu_share": 0.97}
    assert client_fell_behind("main", quiet, 1.0) is None
    assert client_fell_behind("main", edge, 1.0) is None  # at the bound, not past it
    assert client_fell_behind("main", edge | {"read_lag_p50_ms": 5.01}, 1.0) is not None
    assert client_fell_behind("main", {}, 1.0) is None  # a simulated run measures no client
    line = client_fell_behind("main", behind, 1.0)
    assert line.startswith("phase 'main': the client fell behind: a token waited 15.9 ms")
    assert "bound is 5.0 ms" in line and "behind 80% of the phase" in line
    assert "busy 97%" in line and "more client processes (--client-procs auto)" in line
    assert client_fell_behind("main", behind, 80.0) is None  # 16 ms of 80 ms gaps


def test_a_client_that_fell_behind_makes_the_run_invalid():
    served = dict(status=200, finish_reason="length", client_tokens=4, first_token=0.1, end=0.2)
    records = [RequestRecord("main", 0, 8, 4, itl_s=[0.001] * 3, **served)]
    phase = PhaseResult("main", records, (0.0, 1.0))
    phase.client = {"read_lag_p50_ms": 5.5, "late_share": 0.6, "cpu_share": 0.99}
    valid, reasons = judge([phase], None, None)
    assert not valid and reasons == [client_fell_behind("main", phase.client, 1.0)]
    phase.client["read_lag_p50_ms"] = 4.9
    assert judge([phase], None, None) == (True, [])


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
