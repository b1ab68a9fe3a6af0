"""The processes of a test's run: unique markers to find a run's servers by command line, and
checks that no process of a run is left behind."""

from __future__ import annotations

import os
import time
import uuid

import psutil


def survivors(marker: str) -> list[psutil.Process]:
    """Live processes whose command line mentions `marker` (zombies excluded)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of process group `pgid` (a launched server's group is its pid)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                found.append(proc)
        except (psutil.Error, ProcessLookupError):
            continue
    return found


def wait_no_survivors(marker: str, timeout: float = 10.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while (left := survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def unique_marker() -> str:
    """A unique model name, so one test's server processes can be found by command line."""
    return f"scripted-{uuid.uuid4().hex[:10]}"
