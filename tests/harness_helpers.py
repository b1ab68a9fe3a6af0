"""Helpers for the harness tests: the scripted server's command template, suites written on
the fly, unique markers, checks that no process of a run is left behind, and throwaway git
repositories with seeded history."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
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


def engine_arm(model: str, flags: str = ""):
    """The reference engine of this working tree, as this repository's servegate.toml says."""
    from harness.arms.arms import project_arm
    from harness.arms.project import find_project
    from harness.arms.worktrees import checkout

    return project_arm(find_project(REPO), checkout(REPO, "WORKTREE"), model, flags)


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


TIGHT_CAP = (  # the seed's boundary regression: the prefill token cap re-derived as mbp*chunk
    "return 2 * max_batch_prefill * prefill_chunk_size",
    "return max_batch_prefill * prefill_chunk_size",
)


class ThrowawayRepo:
    """This checkout's tracked files as a new git repository, to commit seeded history on."""

    def __init__(self, tmp_path: Path):
        self.path = tmp_path / "repo"
        files = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.split("\0")
        for f in filter(None, files):
            if (REPO / f).is_file():
                (self.path / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / f, self.path / f)
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-qm", "base")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=self.path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    def commit(self, subject: str, path: str, old: str | None = None, new: str = "") -> str:
        """Replace `old` by `new` in `path` (append `new` when old is None), commit; the sha."""
        file = self.path / path
        text = file.read_text()
        if old is None:
            changed = text + new
        else:
            assert old in text, f"{old!r} not in {path}"
            changed = text.replace(old, new)
        file.write_text(changed)
        self.git("commit", "-qam", subject)
        return self.git("rev-parse", "HEAD")
