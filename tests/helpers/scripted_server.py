"""An OpenAI-compatible test server with scripted, known timings and behaviours (delays, an
allocation spike, a crash, a child process), run as a real subprocess by the harness tests."""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time

from aiohttp import web


def args_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, fromfile_prefix_chars="@")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", default="scripted")
    p.add_argument("--ttft-ms", type=float, default=20.0, help="request arrival -> first token")
    p.add_argument("--itl-ms", type=float, default=2.0, help="gap between tokens")
    p.add_argument("--load-ms", type=float, default=0.0, help="answer /health 503 this long")
    p.add_argument("--load-spike-mb", type=int, default=0, help="touch and free this at start")
    p.add_argument("--spike-mb", type=int, default=0, help="allocate and touch this much ...")
    p.add_argument("--spike-ms", type=float, default=30.0, help="... hold it this long ...")
    p.add_argument("--spike-at", default="1", help="... in these requests (1-based, a,b,...)")
    p.add_argument("--die-at", type=int, default=0, help="SIGKILL itself in the Nth request")
    p.add_argument("--child", action="store_true", help="spawn a child process that sleeps")
    p.add_argument("--stray", action="store_true", help="... one that leaves: double fork, setsid")
    p.add_argument("--exit-at-start", type=int, default=None, help="print and exit with code")
    p.add_argument(
        "--tokenize",
        choices=["vllm", "llamacpp", "llama-server", "none"],
        default="vllm",
        help="vllm: /tokenize {prompt|messages}; llamacpp: llama-cpp-python's /extras/tokenize; "
        "llama-server: llama.cpp's /tokenize {content} + /apply-template",
    )
    p.add_argument("--keep-peak", action="store_true", help="POST /v1/memory/reset resets nothing")
    p.add_argument("--no-health", action="store_true", help="404 on /health")
    p.add_argument("--no-metrics", action="store_true")
    p.add_argument("--cut-after", type=int, default=0, help="[DONE] after N tokens, no finish")
    p.add_argument("--endless", action="store_true", help="stream tokens past max_tokens, forever")
    p.add_argument("--no-usage", action="store_true", help="never send a usage chunk")
    p.add_argument("--usage-extra", type=int, default=0, help="over-report completion_tokens")
    p.add_argument("--device-peak", type=int, default=None, help="/v1/memory device peak")
    p.add_argument("--timing-log", default=None, help="JSON lines: id, arrived, first_token")
    p.add_argument("--fail-every", type=int, default=0, help="HTTP 500 on every Nth request")
    p.add_argument("--error-message", default="scripted failure", help="... with this message")
    p.add_argument("--served-model", default=None, help="report this model name, not --model")
    p.add_argument("--banner", default="", help="print this (any text) to the log at start")
    p.add_argument("--finish", default="length", help="finish_reason of the last chunk")
    p.add_argument("--raw-event", default=None, help="send `data: RAW` after the first chunk")
    p.add_argument("--bare-health", action="store_true", help="/health says only status: ok")
    p.add_argument(
        "--ttft-spread", type=float, default=0.0, help="scale TTFT by U(1-s, 1+s) once per process"
    )
    p.add_argument(
        "--ttft-factors",
        default=None,
        help="FILE:a,b,...: the Nth process started with this FILE scales TTFT by the Nth factor",
    )
    p.add_argument(
        "--device-bytes",
        type=float,
        default=0,
        help="export scripted:device_memory_bytes on /metrics: this, +1%% per open stream",
    )
    p.add_argument(
        "--device-speeds",
        default=None,
        help="a,b,...: scale TTFT and ITL by the factor of the device in CUDA_VISIBLE_DEVICES "
        "(of its slowest, for a group)",
    )
    p.add_argument(
        "--device-locks",
        default=None,
        help="DIR: --device-lock DIR/gpuN.lock for every device N in CUDA_VISIBLE_DEVICES",
    )
    p.add_argument("--tag", default="", help="ignored: tells two otherwise equal commands apart")
    p.add_argument("--max-streams", type=int, default=0, help="serve N at once; the rest wait")
    p.add_argument("--api-key", default="", help="401 on every request without this Bearer key")
    p.add_argument(
        "--device-lock",
        default=None,
        help="hold this file's lock, as a GPU server "
        "holds its device; exit as CUDA's out-of-memory when another holds it",
    )
    return p


def hold_device(path: str):
    """The lock on `path`, held for the process's life; a second server exits as vLLM does
    when the GPU's memory is already taken."""
    device = open(path, "a+")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(device, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; "
            "79.19 GiB total capacity; 71.27 GiB already allocated)",
            flush=True,
        )
        sys.exit(1)
    return device


def visible_devices() -> list[str]:
    return (os.environ.get("CUDA_VISIBLE_DEVICES", "0") or "0").split(",")


def next_factor(path: str, factors: str) -> float:
    """Factor number N (cycling) for the Nth process that counts in `path` (a locked file)."""
    values = [float(f) for f in factors.split(",")]
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = len(f.read())
        f.write(".")
    return values[n % len(values)]


def words(text: str) -> int:
    return len(text.split())


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class Scripted:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.o = opts
        # one draw per process: run-to-run noise, like a busy machine's
        opts.ttft_ms *= random.uniform(1 - opts.ttft_spread, 1 + opts.ttft_spread)
        if opts.ttft_factors:  # the same noise every time, in the order the processes start
            opts.ttft_ms *= next_factor(*opts.ttft_factors.rsplit(":", 1))
        if opts.device_speeds:  # a slower device: every step takes longer
            speeds = [float(x) for x in opts.device_speeds.split(",")]
            slow = max(speeds[int(d) % len(speeds)] for d in visible_devices())  # a group's slowest
            opts.ttft_ms, opts.itl_ms = opts.ttft_ms * slow, opts.itl_ms * slow
        self.streams = 0  # open now
        self.started = time.monotonic()
        self.requests = 0
        self.counters = {"ok": 0, "decode": 0, "prefill": 0}

    async def health(self, request: web.Request) -> web.Response:
        if self.o.no_health:
            raise web.HTTPNotFound()
        if (time.monotonic() - self.started) * 1e3 < self.o.load_ms:
            return web.json_response({"status": "loading"}, status=503)
        if self.o.bare_health:  # like vLLM and llama.cpp: no model, commit or config
            return web.json_response({"status": "ok"})
        cfg = {"ttft_ms": self.o.ttft_ms, "itl_ms": self.o.itl_ms}
        model = self.o.served_model or self.o.model
        return web.json_response({"status": "ok", "model": model, "commit": "scripted",
                                  "config": cfg})  # fmt: skip

    async def models(self, request: web.Request) -> web.Response:
        model = self.o.served_model or self.o.model
        return web.json_response({"object": "list", "data": [{"id": model}]})

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        if "messages" in body:
            n = sum(words(m["content"]) + 3 for m in body["messages"])
        else:
            n = words(body.get("prompt") or body.get("input", ""))
        if request.path.startswith("/extras/"):  # llama-cpp-python's shape: tokens only
            return web.json_response({"tokens": list(range(n))})
        return web.json_response({"tokens": list(range(n)), "count": n, "max_model_len": 4096})

    async def llama_tokenize(self, request: web.Request) -> web.Response:
        """llama.cpp's shape: a body without `content` tokenizes the empty string."""
        body = await request.json()
        return web.json_response({"tokens": list(range(words(body.get("content", ""))))})

    async def apply_template(self, request: web.Request) -> web.Response:
        body = await request.json()
        turns = " ".join(f"<{m['role']}> {m['content']}" for m in body["messages"])
        return web.json_response({"prompt": f"{turns} <assistant>"})

    async def metrics(self, request: web.Request) -> web.Response:
        c = self.counters
        text = (
            "# TYPE engine_requests_total counter\n"
            f'engine_requests_total{{outcome="ok"}} {c["ok"]}\n'
            "# TYPE engine_decode_steps_total counter\n"
            f"engine_decode_steps_total {c['decode']}\n"
            "# TYPE engine_prefill_forwards_total counter\n"
            f'engine_prefill_forwards_total{{path="single"}} {c["prefill"]}\n'
        )
        if self.o.device_bytes:  # as vLLM names its gauges: a colon in the name
            used = self.o.device_bytes * (1 + 0.01 * self.streams)
            text += (
                f"# TYPE scripted:device_memory_bytes gauge\nscripted:device_memory_bytes {used}\n"
            )
        return web.Response(text=text, content_type="text/plain")

    async def memory(self, request: web.Request) -> web.Response:
        if request.method == "POST" and not self.o.keep_peak:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        return web.json_response({
            "rss_bytes": status_kb("VmRSS"), "peak_rss_bytes": status_kb("VmHWM"),
            "device_active_bytes": None, "device_peak_bytes": self.o.device_peak,
        })  # fmt: skip

    async def complete(self, request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await request.json()
        self.requests += 1
        n = self.requests
        rid = f"cmpl-{n}"
        if self.o.fail_every and n % self.o.fail_every == 0:
            err = {"error": {"message": self.o.error_message, "type": "server_error"}}
            return web.json_response(err, status=500)
        self.streams += 1
        try:
            return await self.stream(request, body, n, rid, arrived)
        finally:
            self.streams -= 1

    async def stream(self, request: web.Request, body: dict, n: int, rid: str, arrived: float):
        chat = request.path.endswith("/chat/completions")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await self.send(resp, rid, chat, {"role": "assistant", "content": ""} if chat else "")
        if self.o.raw_event is not None:  # a malformed event, then a normal stream
            await resp.write(f"data: {self.o.raw_event}\n\n".encode())
        if self.o.spike_mb and str(n) in self.o.spike_at.split(","):
            await self.spike()
        self.counters["prefill"] += 1
        await asyncio.sleep(max(0.0, self.o.ttft_ms / 1e3 - (time.perf_counter() - arrived)))
        max_tokens = int(body.get("max_tokens", 16))
        for i in range(10**9 if self.o.endless else max_tokens):
            if i:
                await asyncio.sleep(self.o.itl_ms / 1e3)
            self.counters["decode"] += 1
            written = time.perf_counter()
            await self.send(resp, rid, chat, {"content": " tok"} if chat else " tok")
            if i == 0 and self.o.timing_log:
                self.log_timing(rid, arrived, written)
            if self.o.die_at and n == self.o.die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.o.cut_after and i + 1 == self.o.cut_after:  # like llama.cpp's interrupts
                await resp.write(b"data: [DONE]\n\n")
                return resp
        await self.send(resp, rid, chat, {} if chat else "", finish=self.o.finish)
        if (body.get("stream_options") or {}).get("include_usage") and not self.o.no_usage:
            usage = {"prompt_tokens": self.prompt_tokens(body),
                     "completion_tokens": max_tokens + self.o.usage_extra}  # fmt: skip
            event = {"id": rid, "choices": [], "usage": usage}
            await resp.write(f"data: {json.dumps(event)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        self.counters["ok"] += 1
        return resp

    def prompt_tokens(self, body: dict) -> int:
        """What the server processed: the chat template costs 3 words a turn (2 words on the
        llama-server shape's template), the same count its tokenize endpoint gives."""
        if "messages" not in body:
            return words(str(body.get("prompt", "")))
        per_turn = 0 if self.o.tokenize == "llama-server" else 3
        extra = 2 if self.o.tokenize == "llama-server" else 0
        return sum(words(m["content"]) + per_turn for m in body["messages"]) + extra

    async def send(self, resp, rid: str, chat: bool, payload, finish: str | None = None) -> None:
        key = "delta" if chat else "text"
        event = {"id": rid, "choices": [{"index": 0, key: payload, "finish_reason": finish}]}
        await resp.write(f"data: {json.dumps(event)}\n\n".encode())

    def log_timing(self, rid: str, arrived: float, first_token: float) -> None:
        """Server-side times on the shared monotonic clock (perf_counter is CLOCK_MONOTONIC)."""
        with open(self.o.timing_log, "a") as f:
            f.write(json.dumps({"id": rid, "arrived": arrived, "first_token": first_token}) + "\n")

    async def spike(self) -> None:
        size = self.o.spike_mb << 20
        block = bytearray(size)
        block[::4096] = b"\x01" * (size // 4096)  # touch every page so it counts in RSS
        await asyncio.sleep(self.o.spike_ms / 1e3)
        del block


async def say_loading(app: web.Application, load_ms: float) -> None:
    async def say() -> None:
        for second in range(int(load_ms // 1000)):
            print(
                f"loading: capturing CUDA graphs ({second + 1}/{int(load_ms // 1000)} s)",
                flush=True,
            )
            await asyncio.sleep(1)

    app["loading"] = asyncio.get_running_loop().create_task(say())


def limited(handler, streams: int):
    """At most `streams` requests inside `handler` at once; the others wait their turn."""
    slots = asyncio.Semaphore(streams)

    async def wrapped(request: web.Request) -> web.StreamResponse:
        async with slots:
            return await handler(request)

    return wrapped


def require_key(key: str):
    """Every endpoint wants `Authorization: Bearer KEY`, as vLLM's --api-key does for /v1."""

    @web.middleware
    async def check(request, handler):
        if request.headers.get("Authorization") != f"Bearer {key}":
            error = {"message": "invalid API key", "type": "invalid_request_error", "code": 401}
            return web.json_response({"error": error}, status=401)
        return await handler(request)

    return check


def main() -> None:
    opts = args_parser().parse_args()
    if opts.exit_at_start is not None:
        print("scripted server: exiting at start as asked", flush=True)
        sys.exit(opts.exit_at_start)
    device = hold_device(opts.device_lock) if opts.device_lock else None  # noqa: F841
    if opts.device_locks:  # a group: every device of it held for the process's life
        device = [hold_device(f"{opts.device_locks}/gpu{d}.lock") for d in visible_devices()]  # noqa: F841
    if opts.child:
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)", "scripted-child"]
        subprocess.Popen([*sleeper, opts.model])  # the model name marks it for orphan checks
    if opts.stray:  # a daemon's double fork: out of the group, the session and the tree
        leave = "import os, time\nif os.fork():\n    os._exit(0)\nos.setsid()\ntime.sleep(600)"
        subprocess.run([sys.executable, "-c", leave, "scripted-stray", opts.model], check=True)
    if opts.load_spike_mb:  # a load-time transient: held, then given back before ready
        spike = bytearray(opts.load_spike_mb * 2**20)
        spike[::4096] = b"x" * len(spike[::4096])
        del spike
    app = web.Application(middlewares=[require_key(opts.api_key)] if opts.api_key else [])
    s = Scripted(opts)
    app.router.add_get("/health", s.health)
    app.router.add_get("/v1/models", s.models)
    if opts.tokenize == "vllm":
        app.router.add_post("/tokenize", s.tokenize)
    elif opts.tokenize == "llamacpp":
        app.router.add_post("/extras/tokenize", s.tokenize)
    elif opts.tokenize == "llama-server":
        app.router.add_post("/tokenize", s.llama_tokenize)
        app.router.add_post("/apply-template", s.apply_template)
    if not opts.no_metrics:
        app.router.add_get("/metrics", s.metrics)
    app.router.add_route("*", "/v1/memory", s.memory)
    app.router.add_post("/v1/memory/reset", s.memory)
    complete = limited(s.complete, opts.max_streams) if opts.max_streams else s.complete
    app.router.add_post("/v1/completions", complete)
    app.router.add_post("/v1/chat/completions", complete)
    if opts.banner:
        print(opts.banner, flush=True)
    if opts.load_ms:  # what a GPU server says while it loads: a line every second
        app.on_startup.append(lambda app: say_loading(app, opts.load_ms))
    print(f"scripted server on port {opts.port}", flush=True)
    # a stream held open (an endless one, a first token minutes away) does not hold up a TERM
    # past the launcher's grace: every such run would wait it out
    web.run_app(
        app,
        host="127.0.0.1",
        port=opts.port,
        print=None,
        access_log=None,
        shutdown_timeout=0.2,
        backlog=2048,
    )  # fmt: skip  (a burst connects at once)


if __name__ == "__main__":
    main()
