"""A fast OpenAI-shaped streaming server for measuring the client, not the server: raw asyncio
(no HTTP framework), one ticker that writes every open stream's next token, pre-encoded, each
`--itl-ms`, and the time of every write kept per stream (GET /stamps returns them as JSON on
the shared monotonic clock: perf_counter is CLOCK_MONOTONIC on Linux). Only what the harness
needs: GET /health, GET /v1/models, POST /v1/completions and /v1/chat/completions (stream).

    python scripts/fast_sse_server.py --port 8123 --itl-ms 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(obj: dict) -> bytes:
    return frame(b"data: " + json.dumps(obj).encode() + b"\n\n")


def reply(body: bytes, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


class Stream:
    def __init__(self, transport: asyncio.Transport, sid: str, chat: bool, tokens: int) -> None:
        key = "delta" if chat else "text"
        self.transport, self.sid, self.left = transport, sid, tokens
        kind = {
            "id": sid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "model": "fast",
        }  # as OpenAI's own chunks say (AIPerf reads them by it)
        self.token = event(kind | {"choices": [{"index": 0, key: (
            {"content": " tok"} if chat else " tok"), "finish_reason": None}]})  # fmt: skip
        last = {"index": 0, key: {} if chat else "", "finish_reason": "length"}
        usage = {"prompt_tokens": 1, "completion_tokens": tokens}
        self.end = (event(kind | {"choices": [last]})
                    + event(kind | {"choices": [], "usage": usage})
                    + frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")  # fmt: skip


class Server:
    def __init__(self, itl_s: float) -> None:
        self.itl_s, self.streams, self.stamps, self.n = itl_s, [], {}, 0

    async def tick(self) -> None:
        due = time.perf_counter()
        while True:
            due += self.itl_s
            await asyncio.sleep(max(due - time.perf_counter(), 0))
            for s in list(self.streams):
                if s.transport.is_closing():
                    self.streams.remove(s)
                    continue
                s.transport.write(s.token)  # to the socket at once: a loopback peer has it now
                self.stamps[s.sid].append(time.perf_counter())  # each write's own time
                s.left -= 1
                if not s.left:
                    s.transport.write(s.end)
                    self.streams.remove(s)


class Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server, self.buf = server, b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, rest = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = next((int(v) for k, _, v in (ln.partition(":") for ln in lines[1:])
                           if k.lower() == "content-length"), 0)  # fmt: skip
            if len(rest) < length:
                return
            body, self.buf = rest[:length], rest[length:]
            self.answer(method, path, body)

    def answer(self, method: str, path: str, body: bytes) -> None:
        s = self.server
        if method == "GET" and path == "/health":
            self.transport.write(reply(b'{"status":"ok"}'))
        elif method == "GET" and path == "/v1/models":
            self.transport.write(reply(b'{"object":"list","data":[{"id":"fast"}]}'))
        elif method == "GET" and path == "/stamps":
            self.transport.write(reply(json.dumps(s.stamps).encode()))
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            req = json.loads(body or b"{}")
            s.n += 1
            sid = f"fast-{s.n}"
            s.stamps[sid] = []
            self.transport.write(HEAD)
            chat = path.endswith("chat/completions")
            s.streams.append(Stream(self.transport, sid, chat, int(req.get("max_tokens", 16))))
        else:
            self.transport.write(reply(b'{"error":{"message":"not found"}}', "404 Not Found"))


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--itl-ms", type=float, default=1.0)
    o = p.parse_args()
    server = Server(o.itl_ms / 1e3)
    loop = asyncio.get_running_loop()
    # a burst of 256 connects at once: asyncio's default backlog (100) drops SYNs, and those
    # connections wait a second for the retry, then send on a congestion window of one
    srv = await loop.create_server(lambda: Connection(server), "127.0.0.1", o.port, backlog=4096)
    print(f"fast_sse_server on {o.port}, a token every {o.itl_ms:g} ms per stream", flush=True)
    async with srv:
        await server.tick()


if __name__ == "__main__":
    asyncio.run(main())
