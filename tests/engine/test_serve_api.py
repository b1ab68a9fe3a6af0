"""engine serve's HTTP surface on a real tiny engine: errors, overload, disconnects, SIGTERM."""

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request

import aiohttp
import openai
import pytest

from helpers.engine_server import complete, metrics, post
from helpers.marks import needs_smollm2

BAD_INPUTS = [
    ("invalid json", "{not json", 400),
    ("not an object", "[1, 2]", 400),
    ("wrong type", json.dumps({"prompt": "hi", "max_tokens": "ten"}), 400),
    ("max_tokens < 1", json.dumps({"prompt": "hi", "max_tokens": 0}), 400),
    ("beyond context", json.dumps({"prompt": "hi", "max_tokens": 20000}), 400),
    ("empty prompt", json.dumps({"prompt": "", "max_tokens": 4}), 400),
    ("unknown model", json.dumps({"model": "gpt-9", "prompt": "hi"}), 404),
    ("temperature out of range", json.dumps({"prompt": "hi", "temperature": 9}), 400),
    ("token id out of vocab", json.dumps({"prompt": [1, 99999]}), 400),
    ("body too large", json.dumps({"prompt": "x" * (5 * 1024 * 1024)}), 413),
]


def test_bad_inputs_get_openai_errors_and_the_server_keeps_serving(engine_factory):
    eng = engine_factory()
    for name, body, status in BAD_INPUTS:
        code, answer = post(eng.url + "/v1/completions", body)
        assert code == status, name
        assert isinstance(answer["error"]["message"], str) and answer["error"]["type"], name
    code, answer = post(eng.url + "/v1/chat/completions", json.dumps({"messages": "hello"}))
    assert code == 400 and answer["error"]["param"] == "messages"
    code, answer = post(eng.url + "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 3}))
    assert code == 200 and answer["usage"]["completion_tokens"] <= 3
    m = metrics(eng.url)
    assert m['engine_requests_total{outcome="client_error"}'] >= len(BAD_INPUTS) - 1
    assert m['engine_requests_total{outcome="ok"}'] == 1


def test_overload_gets_503_with_retry_after_and_admitted_requests_complete(engine_factory):
    """With its 4 slots held by streams, a burst of 12 fills the queue (8) and the other 4 get
    503 with Retry-After; once the streams leave, the 8 queued complete."""
    eng = engine_factory("--max-queue-depth", "8")
    hold = {"prompt": "hold", "max_tokens": 16000, "ignore_eos": True, "stream": True}

    async def go():
        async with aiohttp.ClientSession() as s:
            holders = await asyncio.gather(
                *(s.post(eng.url + "/v1/completions", json=hold) for _ in range(4))
            )
            while metrics(eng.url)["engine_running_sequences"] < 4:
                await asyncio.sleep(0.02)
            short = {"max_tokens": 48, "ignore_eos": True}
            prompts = [f"request {i} " * 8 for i in range(12)]
            burst = [
                asyncio.ensure_future(complete(s, eng.url, prompt=p, **short)) for p in prompts
            ]
            while sum(b.done() for b in burst) < 4:  # while slots are held, only a 503 ends
                await asyncio.sleep(0.02)
            queued = metrics(eng.url)["engine_queue_depth"]
            for r in holders:
                r.close()  # the streams leave: their slots go to the queue
            return queued, await asyncio.gather(*burst)

    queued, results = asyncio.run(go())
    assert queued == 8
    rejected = [r for r in results if r[0] == 503]
    served = [r for r in results if r[0] == 200]
    assert len(rejected) == 4 and len(served) == 8, [r[0] for r in results]
    assert all(r[2].get("Retry-After") for r in rejected)
    assert all(r[1]["error"]["code"] == "overloaded" for r in rejected)
    assert all(r[1]["usage"]["completion_tokens"] == 48 for r in served)
    code, _ = post(eng.url + "/v1/completions", json.dumps({"prompt": "after", "max_tokens": 2}))
    assert code == 200
    m = metrics(eng.url)
    assert m['engine_requests_total{outcome="rejected"}'] == 4
    assert m['engine_requests_total{outcome="cancelled"}'] == 4


def test_client_disconnect_mid_stream_frees_the_slot(engine_factory):
    eng = engine_factory()

    async def read_a_little_then_leave():
        async with aiohttp.ClientSession() as s:
            body = {"prompt": "stream", "max_tokens": 5000, "ignore_eos": True, "stream": True}
            async with s.post(eng.url + "/v1/completions", json=body) as r:
                chunks = 0
                async for line in r.content:
                    chunks += line.startswith(b"data: ")
                    if chunks >= 3:
                        break
        return chunks

    assert asyncio.run(read_a_little_then_leave()) == 3
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = metrics(eng.url)
        if m["engine_running_sequences"] == 0:
            break
        time.sleep(0.1)
    assert m["engine_running_sequences"] == 0
    assert m['engine_requests_total{outcome="cancelled"}'] == 1
    assert m["engine_kv_live_tokens"] == 0


def test_api_key_guards_v1(engine_factory):
    eng = engine_factory("--api-key", "sekret")
    code, answer = post(eng.url + "/v1/completions", json.dumps({"prompt": "hi"}))
    assert code == 401 and answer["error"]["code"] == "invalid_api_key"
    code, _ = post(
        eng.url + "/v1/completions",
        json.dumps({"prompt": "hi", "max_tokens": 2}),
        {"Authorization": "Bearer sekret"},
    )
    assert code == 200
    with urllib.request.urlopen(eng.url + "/health") as r:  # not under /v1: open
        assert r.status == 200


def test_api_key_guards_every_route_but_the_probes_whatever_its_method(engine_factory):
    """Every route the app registers, GET or POST: 401 without the key, served with it; only
    /health and /metrics are open. Routes are read from the app itself, so a new one is covered."""
    from engine.config import resolve_config
    from engine.guards import OPEN_PATHS
    from engine.server import build_app

    app = build_app(resolve_config({"model": "tiny"}, {}))
    routes = {(r.method, r.resource.canonical) for r in app.router.routes() if r.method != "HEAD"}
    assert {("GET", "/v1/models"), ("GET", "/v1/memory"), ("GET", "/v1/cache/stats")} <= routes
    eng = engine_factory("--api-key", "sekret")
    for method, path in sorted(routes):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer sekret"}):
            body = json.dumps({"prompt": "hi", "max_tokens": 1, "text": "hi", "tokens": [1]})
            req = urllib.request.Request(
                eng.url + path, data=body.encode() if method == "POST" else None, method=method,
                headers={"Content-Type": "application/json", **headers},
            )  # fmt: skip
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    code = r.status
            except urllib.error.HTTPError as e:
                code = e.code
            keyed = headers.get("Authorization") == "Bearer sekret"
            if path in OPEN_PATHS or keyed:
                assert code != 401, (method, path, headers)
            else:
                assert code == 401, (method, path, headers)


def test_openai_client_streams_a_chat_completion(engine_factory):
    eng = engine_factory()
    client = openai.OpenAI(base_url=eng.url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Hello"}],
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage = "", None
    for event in stream:
        if event.choices and event.choices[0].delta.content:
            text += event.choices[0].delta.content
        usage = event.usage or usage
    assert text and usage.completion_tokens == 12
    assert [m.id for m in client.models.list()] == ["tiny"]


def test_sigterm_finishes_or_cancels_in_flight_work_and_exits_zero(engine_factory):
    eng = engine_factory("--drain-seconds", "1")

    async def stream_until_closed():
        async with aiohttp.ClientSession() as s:
            body = {"prompt": "long", "max_tokens": 10000, "ignore_eos": True, "stream": True}
            async with s.post(eng.url + "/v1/completions", json=body) as r:
                lines = []
                async for line in r.content:
                    lines.append(line)
                    if len(lines) == 4:
                        eng.proc.send_signal(signal.SIGTERM)
                return lines

    lines = asyncio.run(stream_until_closed())
    assert eng.proc.wait(60) == 0
    # the drain cut the 10,000-token stream short (no clock: it would have ended on "length")
    assert any(b'"finish_reason": "cancelled"' in ln for ln in lines)


BATCHED = 'engine_prefill_forwards_total{path="batched"}'
PREFILL_S = 'engine_step_seconds_sum{kind="prefill_batched"}'


def probe_during_prefill(url: str, length: int, salt: int) -> tuple[int, float]:
    """Four `length`-token prompts prefilled as one batch, a fifth request queued beside them
    (it takes the scheduler's queue lock), and /health probed every 50 ms until /metrics
    counts the batched forward. Returns how many /health answers came after the forward began
    (at the latest when it was counted, less its own seconds from /metrics: one monotonic clock
    for both processes) and the forward's seconds."""
    prompt = [3 + (salt + i) % 256 for i in range(length)]
    body = {"prompt": prompt, "max_tokens": 1, "stream": True}
    before = metrics(url)

    async def go() -> tuple[list[float], float]:
        async with aiohttp.ClientSession() as s:
            rows = await asyncio.gather(
                *(s.post(url + "/v1/completions", json=body) for _ in range(4))
            )
            extra = await s.post(
                url + "/v1/completions", json={"prompt": [5, 6, 7], "max_tokens": 1, "stream": True}
            )
            answers = []
            while True:
                async with s.get(url + "/health") as r:
                    assert r.status == 200
                answered = time.monotonic()
                if metrics(url)[BATCHED] > before[BATCHED]:
                    counted = time.monotonic()
                    break
                answers.append(answered)  # before the forward was counted: before it ended
                await asyncio.sleep(0.05)
            for r in [*rows, extra]:
                assert r.status == 200 and b"[DONE]" in await r.read()
            return answers, counted

    answers, counted = asyncio.run(go())
    prefill_s = metrics(url)[PREFILL_S] - before.get(PREFILL_S, 0.0)
    return sum(t >= counted - prefill_s for t in answers), prefill_s


def test_health_answers_during_a_long_batched_prefill(engine_factory):
    """The event loop stays free while the compute thread prefills: /health answers again and
    again during a batched prefill, with a fifth request queued beside it (the prompts grow
    until the prefill lasts 2 s or more, whatever the machine's speed)."""
    eng = engine_factory(
        "--max-batch-prefill-tokens", "0", "--batch-window-ms", "1000", "--no-prompt-cache"
    )
    for salt, length in enumerate((3072, 6144, 12288)):
        answered, prefill_s = probe_during_prefill(eng.url, length, salt)
        if prefill_s >= 2.0:
            break
    print(f"/health during a {length}-token batched prefill of {prefill_s:.2f} s: {answered}")
    # a loop that the forward blocks answers none while it runs; a free one every 50 ms
    assert answered >= 5, (length, prefill_s, answered)


@pytest.mark.slow
@needs_smollm2
def test_openai_client_gets_real_text_from_smollm2(engine_factory):
    eng = engine_factory(model="smollm2-135m")
    client = openai.OpenAI(base_url=eng.url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="smollm2-135m",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=24,
        temperature=0,
        stream=True,
    )
    text = "".join(e.choices[0].delta.content or "" for e in stream if e.choices)
    assert "Paris" in text
