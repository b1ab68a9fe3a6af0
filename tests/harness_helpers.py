"""Helpers for the harness tests: the scripted server's command template, suites written on
the fly, unique markers, and checks that no process of a run is left behind."""

from __future__ import annotations

import os
import shlex
import time
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent


def scripted(*args: str, model: str = "scripted") -> str:
    """A --serve-cmd template that starts tests/scripted_server.py with `args` (by its absolute
    path: a command arm runs in the directory harness was started from)."""
    server = shlex.quote(str(REPO / "tests" / "scripted_server.py"))
    return f"{{python}} {server} --port {{port}} --model {model} " + " ".join(args)


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


def wait_no_survivors(marker: str, timeout: float = 3.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while (left := survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def unique_marker() -> str:
    """A unique model name, so one test's server processes can be found by command line."""
    return f"scripted-{uuid.uuid4().hex[:10]}"


def write_suite(tmp_path: Path, text: str, name: str = "t.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path
