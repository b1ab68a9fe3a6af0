"""Headless Chromium driven over its DevTools protocol with aiohttp's websocket client: no
driver binary, no Selenium. Opens pages with every fetch off the machine refused (a closed
proxy port), evaluates JavaScript in them and collects what their console said."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp

CHROMIUM = shutil.which("chromium")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-sync", "--disable-component-update",
    "--window-size=900,1400", "--remote-debugging-port=0",
    # the proxy is a closed port: any fetch the page tried would fail, as with no network
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
)  # fmt: skip


class Browser:
    """`async with Browser() as page:` a started Chromium and its first tab."""

    def __init__(self, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.messages: list[str] = []  # console and log entries at warning level and above
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._loaded = asyncio.Event()

    async def __aenter__(self) -> Browser:
        self._profile = tempfile.TemporaryDirectory(
            prefix="servegate-chromium-", ignore_cleanup_errors=True
        )
        profile = Path(self._profile.name)
        self._proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        port_file, deadline = profile / "DevToolsActivePort", time.monotonic() + self.timeout_s
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start (exit {self._proc.poll()})")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as r:
            tab = next(t for t in await r.json() if t["type"] == "page")
        self._ws = await self._http.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.call(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc) -> None:
        self._reader.cancel()
        await self._ws.close()
        await self._http.close()
        os.killpg(self._proc.pid, signal.SIGKILL)  # the browser and its renderers
        self._proc.wait()
        self._profile.cleanup()

    async def _read(self) -> None:
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data:
                self._pending.pop(data["id"]).set_result(data)
            elif data["method"] == "Page.loadEventFired":
                self._loaded.set()
            elif data["method"] == "Runtime.consoleAPICalled" and data["params"]["type"] in (
                "error",
                "warning",
                "assert",
            ):
                args = data["params"]["args"]
                self.messages.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in args)
                )
            elif data["method"] == "Runtime.exceptionThrown":
                details = data["params"]["exceptionDetails"]
                self.messages.append(
                    details.get("exception", {}).get("description", details["text"])
                )
            elif data["method"] == "Log.entryAdded" and data["params"]["entry"]["level"] in (
                "error",
                "warning",
            ):
                self.messages.append(data["params"]["entry"]["text"])

    async def call(self, method: str, **params) -> dict:
        i = next(self._ids)
        self._pending[i] = asyncio.get_running_loop().create_future()
        await self._ws.send_json({"id": i, "method": method, "params": params})
        reply = await asyncio.wait_for(self._pending[i], self.timeout_s)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def open(self, url: str) -> None:
        """Navigate and wait for the load event (images included)."""
        self._loaded.clear()
        await self.call("Page.navigate", url=url)
        await asyncio.wait_for(self._loaded.wait(), self.timeout_s)

    async def evaluate(self, expression: str):
        """The JSON value of a JavaScript expression in the page."""
        out = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression[:60]}...: {out['exceptionDetails']['text']}")
        return out["result"].get("value")

    async def screenshot(self, path: str | Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        Path(path).write_bytes(base64.b64decode(shot["data"]))
