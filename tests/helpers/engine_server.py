"""Start a real `engine serve` process for a test, talk to it, and stop it with SIGTERM."""

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp

from helpers import REPO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EngineProcess:
    def __init__(self, *flags: str, model: str = "tiny", log: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "engine.cli",
            "serve",
            "--model",
            model,
            "--port",
            str(self.port),
            *flags,
        ]
        self.log = log
        out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def wait_ready(self, timeout: float = 120) -> "EngineProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text()[-2000:] if self.log else ""
                raise RuntimeError(f"engine exited with {self.proc.returncode}: {tail}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + "/health", timeout=2) as r,
            ):
                if r.status == 200:
                    return self
            time.sleep(0.2)
        raise TimeoutError("engine did not become healthy")

    def stop(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def metrics(url: str) -> dict[str, float]:
    """/metrics as {'name{labels}': value}, histograms and comments left out."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "_bucket" not in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


async def complete(session: aiohttp.ClientSession, url: str, **body) -> tuple[int, dict, dict]:
    async with session.post(url + "/v1/completions", json=body) as r:
        return r.status, await r.json(), dict(r.headers)


def run_concurrently(url: str, bodies: list[dict]) -> list[tuple[int, dict, dict]]:
    async def go():
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
            return await asyncio.gather(*(complete(s, url, **b) for b in bodies))

    return asyncio.run(go())


def post(url: str, body: bytes | str, headers: dict | None = None) -> tuple[int, dict]:
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
