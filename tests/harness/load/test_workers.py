"""More than one client process: requests dealt over worker processes with their own event
loops, records merged on one clock in request order; the same workload (records' shape and
fingerprint) with 1 or N processes; bursts still back to back; a conversation stays whole."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from harness.arms.arms import make_arm
from harness.load.workers import auto_procs, split
from harness.runs.measure import run_arm
from harness.workload.arrival import Burst
from harness.workload.phase import Phase
from harness.workload.suite import AUTO, SuiteError, load_suite, override

from helpers.arms import scripted
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "main"
arrival = "burst"
clients = 5
requests = 5
bursts = 3
prompt_tokens = 16
max_tokens = 4

[[phase]]
name = "chat"
endpoint = "chat"
clients = 2
requests = 3
turns = 2
prompt_tokens = 16
max_tokens = 3
"""


def test_requests_and_clients_are_dealt_evenly():
    assert split(list(range(10, 15)), 5, 2) == [([10, 12, 14], 3), ([11, 13], 2)]
    assert split([0], 4, 3) == [([0], 2)]  # a process with nothing to send is not sent to
    assert split(list(range(4)), 1, 2) == [([0, 2], 1), ([1, 3], 1)]  # each at least one


def shape(run: dict) -> list[tuple]:
    keys = ("phase", "index", "turn", "prompt_tokens", "max_tokens", "ok", "client_tokens")
    return [tuple(r[k] for k in keys) for r in run["requests"]]


def test_two_client_processes_fire_the_same_workload(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--ttft-ms 30 --itl-ms 5", model=marker))
    one = run_arm(suite, arm, tmp_path / "one.log")
    stamps = tmp_path / "stamps.jsonl"  # the server's own arrival and first-token times
    logged = scripted(f"--ttft-ms 30 --itl-ms 5 --timing-log {stamps}", model=marker)
    two = run_arm(override(suite, client_procs=2), make_arm(marker, serve_cmd=logged),
                  tmp_path / "two.log")  # fmt: skip
    assert not wait_no_survivors(marker)
    for run in (one, two):  # valid, unless a loaded machine starved the client
        assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    assert shape(one) == shape(two) and one["fingerprint"] == two["fingerprint"]
    main = two["phases"]["main"]
    assert main["client"]["processes"] == 2 and one["phases"]["main"]["client"]["processes"] == 1
    assert main["client"]["tokens"] == 15 * 4
    reqs = [r for r in two["requests"] if r["phase"] == "main"]
    bursts = [reqs[i : i + 5] for i in range(0, 15, 5)]
    for prev, nxt in zip(bursts, bursts[1:], strict=False):  # still back to back
        assert min(r["send"] for r in nxt) >= max(r["end"] for r in prev)
    # every process stamps on the run's clock: each request was sent before the server took
    # it in and read after the server wrote its first token (one monotonic clock for all)
    server = {x["id"]: x for x in map(json.loads, stamps.read_text().splitlines())}
    origin = two["clock_origin"]
    for r in two["requests"]:
        seen = server[r["response_id"]]
        assert origin + r["send"] <= seen["arrived"] <= seen["first_token"]
        assert seen["first_token"] <= origin + r["first_token"] <= origin + r["end"]
    turns = [r for r in two["requests"] if r["phase"] == "chat"]
    assert [(r["index"], r["turn"]) for r in turns] == [(i, i % 2 + 1) for i in range(6)]
    for first, second in zip(turns[::2], turns[1::2], strict=True):  # each on one process,
        assert second["send"] >= first["end"]  # its turns in order on the one clock


def test_client_procs_is_checked_and_not_part_of_the_workload(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    assert dataclasses.replace(suite, client_procs=AUTO) == suite  # the default
    assert override(suite, client_procs=3).phases == suite.phases
    assert override(suite, client_procs="auto").client_procs == AUTO
    for bad in ("0", "true", "2.5", "65", '"many"'):
        with pytest.raises(SuiteError, match="client_procs"):
            load_suite(str(write_suite(tmp_path, f"client_procs = {bad}\n" + SUITE, "b.toml")))
    assert load_suite(str(write_suite(tmp_path, "client_procs = 4\n" + SUITE, "c.toml"))
                      ).client_procs == 4  # fmt: skip


def test_auto_is_a_process_per_32_streams_up_to_the_cores():
    assert [auto_procs(n, 16) for n in (1, 32, 33, 64, 256, 1024)] == [1, 1, 2, 2, 8, 16]
    assert [auto_procs(n, 2) for n in (1, 32, 33, 256)] == [1, 1, 2, 2]
    assert auto_procs(256, None) == auto_procs(0, 8) == 1


def test_a_worker_that_dies_fails_its_requests_instead_of_losing_them():
    """A client process killed mid-phase: its requests are kept, failed as not sent by it;
    the other process's are served."""
    import asyncio

    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from harness.load.prompts import Prompt
    from harness.load.workers import client_workers

    async def three_seconds(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text, finish in ((" a", None), ("", "length")):
            await asyncio.sleep(1.5)
            choice = {"index": 0, "text": text, "finish_reason": finish}
            await resp.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def main():
        app = web.Application()
        app.router.add_post("/v1/completions", three_seconds)
        async with TestServer(app) as server:
            url = str(server.make_url("")).rstrip("/")
            with client_workers(2, url, "m", time.perf_counter(), 4) as workers:
                phase = Phase("p", arrival=Burst(), clients=4, requests=4, max_tokens=4)
                firing = asyncio.ensure_future(workers.fire(
                    phase, [Prompt("hi", 1)] * 4, [0, 1, 2, 3], 0.0, 120.0, lambda r: None,
                    asyncio.Event()))  # fmt: skip
                await asyncio.sleep(1.0)  # before any stream of 3 s can have ended
                workers.procs[0].kill()
                return await firing

    records = asyncio.run(main())
    assert [r.index for r in records] == [0, 1, 2, 3]  # process 0 had 0 and 2, process 1 1, 3
    lost = [r for r in records if r.index in (0, 2)]
    assert all(r.error == "not sent: its client process exited" and r.failed for r in lost)
    assert all(r.ok and r.client_tokens == 1 for r in records if r.index in (1, 3))
