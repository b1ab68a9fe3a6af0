"""Client mistakes answer 4xx in the OpenAI shape and count as client_error; auth and binding."""

import asyncio
import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.request
import zlib

import aiohttp
import pytest

from helpers import REPO
from helpers.engine_server import free_port, metrics, post

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
# (name, path, raw body, status): each answered 500 server_error before
FORMER_500S = [
    ("lone surrogate in a prompt", COMPLETIONS, '{"prompt": "a\\ud800b", "max_tokens": 2}', 400),
    (
        "lone surrogate in chat content",
        CHAT,
        '{"messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 2}',
        400,
    ),
    ("lone surrogate to /tokenize", "/tokenize", '{"prompt": "\\udfff"}', 400),
    ("JSON nested 100k deep", COMPLETIONS, "[" * 100_000 + "]" * 100_000, 400),
    (
        "a 5000-digit max_tokens",
        COMPLETIONS,
        '{"prompt": "hi", "max_tokens": ' + "9" * 5000 + "}",
        400,
    ),
    ("seed -1", COMPLETIONS, '{"prompt": "hi", "max_tokens": 2, "seed": -1}', 400),
    (
        "content part text 5",
        CHAT,
        '{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
        400,
    ),
    ("content part null", CHAT, '{"messages": [{"role": "user", "content": [null]}]}', 400),
]
UNSUPPORTED = [
    {"best_of": 2},
    {"logprobs": 1},
    {"echo": True},
    {"presence_penalty": 0.5},
    {"frequency_penalty": -1},
    {"tools": [{"type": "function", "function": {"name": "f"}}]},
    {"n": 2},
    {"stop": ["x"] * 5},
    {"stop": "y" * (256 * 1024 + 1)},
]


def test_former_500s_are_4xx_and_counted_as_client_errors(engine_factory):
    eng = engine_factory()
    for name, path, body, status in FORMER_500S:
        code, answer = post(eng.url + path, body)
        assert code == status, name
        assert answer["error"]["type"] == "invalid_request_error", name
    for extra in UNSUPPORTED:
        code, answer = post(eng.url + COMPLETIONS, json.dumps({"prompt": "hi", **extra}))
        assert code == 400 and answer["error"]["param"] in (*extra, "stop"), extra
    fine = {"prompt": "hi", "max_tokens": 2, "presence_penalty": 0, "logprobs": None, "n": 1}
    assert post(eng.url + COMPLETIONS, json.dumps(fine))[0] == 200
    m = metrics(eng.url)
    assert m['engine_requests_total{outcome="client_error"}'] == len(FORMER_500S) + len(UNSUPPORTED)
    assert m['engine_requests_total{outcome="error"}'] == 0


def test_assistant_tool_call_message_with_null_content_is_accepted(engine_factory):
    eng = engine_factory()
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "call f"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    body = json.dumps({"messages": messages, "max_tokens": 3})
    assert post(eng.url + CHAT, body)[0] == 200


def raw_http(port: int, head: bytes, body: bytes = b"", wait: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(head + body)
        return s.recv(65536)


def test_expect_continue_over_the_limit_is_413_and_a_slow_body_408(engine_factory):
    eng = engine_factory("--read-timeout", "1")
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 99999999\r\nExpect: 100-continue\r\n\r\n"
    )
    answer = raw_http(eng.port, head)
    assert answer.startswith(b"HTTP/1.1 413") and b"invalid_request_error" in answer
    small = head.replace(b"99999999", b"40")
    assert raw_http(eng.port, small).startswith(b"HTTP/1.1 100 Continue")
    short = small.replace(b"Expect: 100-continue\r\n", b"")
    # each after --read-timeout's 1 s; the 60 s default instead (the flag lost) fails
    t0 = time.monotonic()
    answer = raw_http(eng.port, short, b'{"prompt": "hi"', wait=30)  # 15 of the 40 bytes
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - t0 < 20
    t0 = time.monotonic()
    assert raw_http(eng.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n", wait=30) == b""
    assert time.monotonic() - t0 < 20  # headers never finished: the connection is closed


def test_auth_covers_every_endpoint_that_does_work(engine_factory):
    eng = engine_factory("--api-key", "s3cret")
    for path, body in [("/tokenize", '{"prompt": "hi"}'), ("/detokenize", '{"tokens": [70]}')]:
        code, answer = post(eng.url + path, body)
        assert code == 401 and answer["error"]["code"] == "invalid_api_key", path
        assert post(eng.url + path, body, {"Authorization": "Bearer s3cret"})[0] == 200
    with urllib.request.urlopen(eng.url + "/health", timeout=10) as r:
        assert r.status == 200  # probes stay open


def serve(*flags: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "engine.cli", "serve", "--model", "tiny", *flags]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_empty_api_key_is_refused_and_an_exposed_bind_warns(monkeypatch):
    monkeypatch.setenv("ENGINE_API_KEY", "from-env")
    p = serve("--api-key", "", "--port", str(free_port()), env=None)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 2 and "--api-key must not be empty" in out
    assert "Traceback" not in out
    monkeypatch.delenv("ENGINE_API_KEY")
    p = serve("--host", "0.0.0.0", "--port", str(free_port()))
    try:
        deadline, seen = time.monotonic() + 60, ""
        while "without --api-key" not in seen and time.monotonic() < deadline:
            seen += p.stdout.readline()
        assert "WARNING" in seen and "without --api-key" in seen
    finally:
        p.terminate()
        p.wait(15)


@pytest.mark.timeout(120)
def test_client_disconnects_log_one_quiet_line(engine_factory):
    eng = engine_factory()

    async def leave_mid_stream():
        async with aiohttp.ClientSession() as s:
            body = {"prompt": "go", "max_tokens": 3000, "ignore_eos": True, "stream": True}
            async with s.post(eng.url + COMPLETIONS, json=body) as r:
                await r.content.readline()

    for _ in range(3):
        asyncio.run(leave_mid_stream())
    # wait for all three outcomes, not only for an empty batch: a request's outcome is counted
    # by its handler when it sees the disconnect, which can come after the batch emptied
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = metrics(eng.url)
        done = sum(v for k, v in m.items() if k.startswith("engine_requests_total{"))
        if done >= 3 and not m["engine_running_sequences"]:
            break
        time.sleep(0.1)
    assert m['engine_requests_total{outcome="cancelled"}'] == 3, m
    log = eng.log.read_text()
    assert "Traceback" not in log and "ERROR" not in log


def send_encoded(url: str, data: bytes, encoding: str | None) -> tuple[int, str, bytes]:
    """Status, Content-Type and raw answer of a POST whose body says `encoding`."""
    headers = {"Content-Type": "application/json"}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


# every Content-Encoding but identity is refused unread, in the API shape: an allowlist, not
# a list of known compressions (aiohttp itself would inflate gzip, deflate, br and zstd)
REFUSED_ENCODINGS = ["gzip", "deflate", "br", "zstd", "compress", "x-foo", "GZIP", "gzip, identity"]


def test_a_compressed_body_is_415_and_a_client_leaving_mid_body_is_cancelled(engine_factory):
    eng = engine_factory()
    body = json.dumps({"prompt": "hi", "max_tokens": 2}).encode()
    sent = [("gzip", gzip.compress(body)), ("gzip", b"\x1f\x8b not gzip at all"),
            ("deflate", zlib.compress(body)), *((e, body) for e in REFUSED_ENCODINGS)]  # fmt: skip
    for encoding, data in sent:
        status, kind, raw = send_encoded(eng.url + COMPLETIONS, data, encoding)
        assert status == 415 and kind.startswith("application/json"), (encoding, status, raw)
        assert json.loads(raw) == {"error": {
            "message": f"Content-Encoding {encoding.lower()!r} is not supported: send the body "
                       "uncompressed",
            "type": "invalid_request_error", "param": None,
            "code": "unsupported_content_encoding"}}, encoding  # fmt: skip
    for encoding in (None, "", "identity", " Identity "):
        status, _, raw = send_encoded(eng.url + COMPLETIONS, body, encoding)
        assert status == 200 and json.loads(raw)["choices"], (encoding, status, raw)
    with socket.create_connection(("127.0.0.1", eng.port)) as s:  # says 1000 bytes, sends 20
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: 1000\r\n\r\n" + body[:20])  # fmt: skip
        time.sleep(0.3)
    deadline = time.monotonic() + 60
    while metrics(eng.url)['engine_requests_total{outcome="cancelled"}'] < 1:
        assert time.monotonic() < deadline, "the client that left was never counted"
        time.sleep(0.1)
    assert post(eng.url + COMPLETIONS, body.decode())[0] == 200  # the engine serves on
    m = metrics(eng.url)
    assert m['engine_requests_total{outcome="error"}'] == 0
    assert m['engine_requests_total{outcome="client_error"}'] == len(sent)
    assert m['engine_requests_total{outcome="ok"}'] == 5
    assert "Traceback" not in eng.log.read_text()
