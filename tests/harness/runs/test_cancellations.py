"""Cancellations: the client drops a seeded share of a phase's streams; they are counted, not
timed; the reference engine cancels them, its gauges return to where they were, and the other
streams' text is the same, byte for byte, as in a run that cancels nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.load.cancels import cancelled
from harness.workload.suite import SuiteError, load_suite

from helpers import REPO
from helpers.cli import harness, valid_attempt
from helpers.suites import write_suite

SUITE = REPO / "suites" / "cancellations.toml"


def test_the_choice_is_seeded_and_sized():
    phase = load_suite(str(SUITE)).phases[0]
    chosen = cancelled(phase)
    assert len(chosen) == 3 and chosen == cancelled(phase) and chosen <= set(range(10))


@pytest.mark.parametrize(
    ("keys", "needle"),
    [
        ("cancel_share = 1.5\ncancel_after_tokens = 2", "cancel_share must be a fraction"),
        ("cancel_share = 0.5", "needs cancel_after_tokens or cancel_after_ms"),
        ("cancel_share = 0.5\ncancel_after_tokens = 2\ncancel_after_ms = 9", "needs cancel_after"),
        ("cancel_share = 0.5\ncancel_after_tokens = 16", "below max_tokens"),
        ("cancel_share = 0.5\ncancel_after_ms = -1", "cancel_after_ms must be"),
        ("cancel_after_tokens = 2", "needs a cancel_share"),
    ],
)
def test_cancel_keys_that_cannot_be_followed_are_one_line(tmp_path, keys, needle):
    text = f'model = "m"\n[[phase]]\nname = "p"\nmax_tokens = 16\n{keys}\n'
    with pytest.raises(SuiteError, match=needle):
        load_suite(str(write_suite(tmp_path, text)))


def run(tmp_path: Path, suite: Path, name: str) -> dict:
    def attempt(n: int):
        out = tmp_path / f"{name}{n}.json"
        r = harness("run", "--quiet", "--suite", str(suite), "--model", "tiny", "--out", str(out),
                    cwd=REPO, cache=tmp_path / "cache", timeout=600)  # fmt: skip
        return r, json.loads(out.read_text())

    r, saved = valid_attempt(attempt)
    assert r.returncode == 0, r.stdout + r.stderr
    return saved["runs"][0]


def test_the_engine_cancels_frees_and_serves_the_others_unchanged(tmp_path):
    text = SUITE.read_text()
    plain = "\n".join(line for line in text.splitlines()
                      if not line.startswith(("cancel_", '"engine_requests_total')))  # fmt: skip
    dropped = run(tmp_path, SUITE, "dropped")
    whole = run(tmp_path, write_suite(tmp_path, plain, "plain.toml"), "whole")
    assert dropped["valid"], dropped["invalid_reasons"]  # cancelled == 3, ok == 7, gauges == 0
    expect = dropped["phases"]["main"]["expect"]
    assert len(expect) == 5 and all(e["status"] == "pass" for e in expect), expect
    stats = dropped["phases"]["main"]["stats"]
    assert (stats["ok"], stats["cancelled"], stats["errors"]) == (7, 3, 0)
    chosen = cancelled(load_suite(str(SUITE)).phases[0])
    for mine, theirs in zip(dropped["requests"], whole["requests"], strict=True):
        if mine["index"] in chosen:
            assert mine["cancelled"] and 8 <= mine["client_tokens"] < 32 and not mine["error"]
        else:
            assert mine["ok"] and mine["output_sha256"] == theirs["output_sha256"]
    assert whole["phases"]["main"]["stats"]["cancelled"] == 0


def test_the_client_closes_the_stream_and_the_server_sees_it_go():
    import asyncio

    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from harness.load.load import LoadDriver, make_session
    from harness.load.record import RequestRecord
    from harness.workload.phase import Cancels, Phase

    seen = {}

    def app(first_s: float) -> web.Application:
        async def tokens(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await asyncio.sleep(first_s)
            try:
                for i in range(12):
                    choice = {"index": 0, "text": f" t{i}", "finish_reason": None}
                    await resp.write(b"data: " + json.dumps({"choices": [choice]}).encode()
                                     + b"\n\n")  # fmt: skip
                    await asyncio.sleep(0.1)  # 0.8 s between the third and the last
            except (ConnectionResetError, asyncio.CancelledError):  # aiohttp cancels it
                seen[first_s] = i
                raise
            return resp

        application = web.Application()
        application.router.add_post("/v1/completions", tokens)
        return application

    async def main() -> list[RequestRecord]:
        out = []
        async with make_session() as session:
            for first_s, keys in (
                (0.0, {"after_tokens": 3}),
                (1.0, {"after_ms": 100}),
            ):
                async with TestServer(app(first_s)) as server:
                    driver = LoadDriver(session, str(server.make_url("")).rstrip("/"), "m", 0.0)
                    phase = Phase("p", max_tokens=12, cancels=Cancels(1.0, **keys))
                    rec = RequestRecord("p", 0, 8, 12)
                    await driver.request(phase, "hi", rec, cancel=True)
                    out.append(rec)
                    await asyncio.sleep(0.1)  # the handler's next write finds the client gone
        return out

    by_tokens, by_time = asyncio.run(main())
    assert by_tokens.cancelled and not by_tokens.error and by_tokens.client_tokens == 3
    assert not by_tokens.ok and not by_tokens.failed
    assert by_time.cancelled and by_time.client_tokens == 0 and by_time.first_token is None
    assert 0.09 <= by_time.e2e_s < 1.0  # dropped at 100 ms, before the first token at 1 s
    assert 2 <= seen[0.0] < 11  # the server saw the client go after its third token
