"""Builds: the project file's `build` command, run once per commit in that commit's worktree.
Its log is kept beside the worktree; a success is cached by sha and command, so `ab`, `sweep` and
`bisect` never build a commit twice. A failure is cached too (a build is assumed to be a
function of the commit and the command); removing its `.failed` file retries it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.arms.process_mark import MARK, end_marked, new_mark
from harness.arms.project import FILE_NAME, Project
from harness.arms.worktrees import Checkout, RefError, cache_dir

_WORKING_TREE: dict[tuple[str, str], Build | BuildError] = {}  # built once per process


class BuildError(RefError):
    """A build that failed; the message is one line ending with the log's last line."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass(frozen=True)
class Build:
    command: str
    log: Path
    seconds: float  # 0 when cached
    cached: bool


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def build_command(project: Project, co: Checkout) -> str:
    values = {"python": sys.executable, "worktree": str(co.path), "commit": co.commit}
    return project.build.format_map({k: shlex.quote(v) for k, v in values.items()})


def build(project: Project, co: Checkout, say: Callable[[str], None] = _stderr) -> Build | None:
    """Build `co` as `project` says (None when the project has no build step)."""
    if not project.build:
        return None
    command = build_command(project, co)
    key = hashlib.sha256(command.encode()).hexdigest()[:10]
    name = "WORKTREE" if co.is_working_tree else co.commit
    stem = cache_dir(co.repo or co.path) / f"{name}.build-{key}"
    if co.is_working_tree:
        memo = (str(co.path), command)
        if memo not in _WORKING_TREE:
            try:
                _WORKING_TREE[memo] = _build(co, command, stem, say, project.build_timeout)
            except BuildError as exc:
                _WORKING_TREE[memo] = exc
        if isinstance(done := _WORKING_TREE[memo], BuildError):
            raise done
        return done
    stem.parent.mkdir(parents=True, exist_ok=True)
    with stem.with_name(stem.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another harness building the same commit: wait for it
        return _build(co, command, stem, say, project.build_timeout, cache=True)


class BuildTimeout(Exception):
    """The build ran past its limit; its process group was killed."""


def _build(
    co: Checkout, command: str, stem: Path, say, timeout_s: float, cache: bool = False
) -> Build:
    log, done, failed = (stem.with_name(stem.name + s) for s in (".log", ".ok", ".failed"))
    if cache and done.exists():
        return Build(command, log, 0.0, True)
    if cache and failed.exists():
        raise _failure(co, failed.read_text().strip(), log, f" (cached: remove {failed} to retry)")
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"build {co.label}: {command} (log: {log})")
    t0 = time.monotonic()
    try:
        rc = _run(command, co.path, log, timeout_s)
    except BuildTimeout:  # not remembered as a failure: a slow machine or a tight limit
        what = (
            f"build timed out after {timeout_s:g} s (build_timeout in {FILE_NAME}) and was stopped"
        )
        raise _failure(co, what, log) from None
    seconds = time.monotonic() - t0
    if rc != 0:
        what = f"build failed (exit {rc}) after {seconds:.0f} s"
        if cache:
            failed.write_text(what + "\n")
        raise _failure(co, what, log)
    if cache:
        done.write_text(f"{command}\n{seconds:.1f} s\n")
    say(f"built {co.label} in {seconds:.0f} s")
    return Build(command, log, seconds, False)


def _failure(co: Checkout, what: str, log: Path, note: str = "") -> BuildError:
    tail = _tail(log)
    last = tail.splitlines()[-1] if tail.strip() else "(the log is empty)"
    return BuildError(f"{co.label}: {what}: {last} (log: {log}){note}", tail)


def _run(command: str, cwd: Path, log: Path, timeout_s: float | None = None) -> int:
    """The build's exit code; BuildTimeout when it runs past `timeout_s`, its whole process
    group stopped first. Whatever it left running (a daemon, a double fork) is ended with it."""
    mark = new_mark()
    with log.open("wb") as out:
        out.write(f"$ {command}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            command, shell=True, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, MARK: mark},
        )  # fmt: skip
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
        except BaseException:  # interrupted: the whole build goes with us
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            end_marked(mark)
    raise BuildTimeout


def _stop(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """TERM the build's process group, then KILL what is left of it after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(log: Path, lines: int = 20) -> str:
    try:
        text = log.read_bytes()[-16 * 1024 :].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(line for line in text.splitlines()[-lines:])
