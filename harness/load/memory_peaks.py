"""Exact per-phase memory peaks: the kernel's RSS high-water mark of the server's process tree
(Linux VmHWM, reset through clear_refs) and the server's own `/v1/memory` allocator counters."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import aiohttp
import psutil

from harness.load.server_reads import byte_count, fetch_json

HWM_SUPPORTED = sys.platform.startswith("linux")


def reset_hwm(procs: list[psutil.Process]) -> bool:
    """Reset VmHWM to the current RSS for every process; False if any could not be reset."""
    if not HWM_SUPPORTED:
        return False
    ok = True
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            ok = False
    return ok


def read_hwm(procs: list[psutil.Process]) -> int | None:
    """Sum of VmHWM over the tree, in bytes. Exact for one process; for several, an upper bound
    on the tree's peak (their peaks need not coincide). None where the kernel has no VmHWM."""
    if not HWM_SUPPORTED:
        return None
    total, found = 0, False
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
                        found = True
                        break
        except (OSError, ValueError):
            continue
    return total if found else None


@dataclass(slots=True)
class ServerMemory:
    """What `GET /v1/memory` answered (all bytes; None when the server does not know)."""

    rss_bytes: int | None = None
    peak_rss_bytes: int | None = None
    device_active_bytes: int | None = None
    device_peak_bytes: int | None = None

    @classmethod
    def from_json(cls, data: object) -> ServerMemory:
        """Each figure that can be a byte count; any other answer is None."""
        if not isinstance(data, dict):
            data = {}

        def num(key: str) -> int | None:
            return byte_count(data.get(key))

        return cls(*(num(k) for k in cls.__slots__))

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


class MemoryEndpoint:
    """`/v1/memory` of one server; `available` turns False at the first answer that is not 200."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session, self.base = session, base
        self.available = True

    async def reset(self) -> None:
        await self._call("POST", "/v1/memory/reset")

    async def read(self) -> ServerMemory | None:
        return await self._call("GET", "/v1/memory")

    async def _call(self, method: str, path: str) -> ServerMemory | None:
        if not self.available:
            return None
        try:
            status, data = await fetch_json(self.session, method, self.base + path)
        except ValueError:
            self.available = False
            return None
        if status != 200:
            self.available = False
            return None
        return ServerMemory.from_json(data)
