"""Cold start of one server: a free port, its own process group, stdout/stderr to a log file,
readiness by /health (or /v1/models), and a teardown that leaves no process behind."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.arms.arms import Arm
from harness.arms.process_mark import MARK, end_marked, new_mark

_LIVE: set[Launcher] = set()
_LIVE_LOCK = threading.Lock()  # a launch and a stop_all() never interleave
_closing = threading.Event()  # set by stop_all(): no new server may start


@contextlib.contextmanager
def signals_deferred():
    """SIGINT and SIGTERM held back until the block ends, in the main thread (the only one a
    signal interrupts): a server started but not yet recorded, or forgotten but not yet killed,
    would outlive the harness. A signal that came meanwhile is raised again at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    old = {sig: signal.signal(sig, lambda n, f: came.append(n)) for sig in DEFERRED}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in came[:1]:
            signal.raise_signal(sig)


DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class LaunchError(RuntimeError):
    """The server did not become ready; `log_tail` holds the end of its log."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass(slots=True)
class Server:
    """A ready server: where to reach it and what it said about itself."""

    url: str
    pid: int | None = None
    startup_s: float | None = None
    health: dict = field(default_factory=dict)
    ready_path: str = "/health"
    log_path: Path | None = None


_HANDED_OUT: set[int] = set()  # ports given to servers of this process (arms start together)
_PORT_LOCK = threading.Lock()


def free_port() -> int:
    """A port free now and not handed out before: two arms starting at once never share one."""
    with _PORT_LOCK:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


PROBE_CAP = 64 << 10  # a health answer is a line of JSON


def probe(url: str, timeout: float = 2.0, api_key: str = "") -> tuple[int, dict]:
    """GET url -> (status, JSON body or {}); status 0 when nothing answered whole within
    `timeout` (headers to the last byte) and PROBE_CAP bytes."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout
        ) as resp:
            status, body = resp.status, _read_within(resp, deadline)
    except urllib.error.HTTPError as exc:
        status, body = exc.code, _read_within(exc, deadline)
    except (OSError, ValueError):
        return 0, {}
    if body is None:
        return 0, {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = {}
    return status, data if isinstance(data, dict) else {}


def _read_within(resp, deadline: float) -> bytes | None:
    """The body, or None past PROBE_CAP bytes or the deadline (a read waits at most the
    socket's timeout; an endless or trickling body is cut, not waited for)."""
    body = bytearray()
    try:
        while chunk := resp.read1(1 << 14) if hasattr(resp, "read1") else resp.read(1 << 14):
            body += chunk
            if len(body) > PROBE_CAP or time.monotonic() > deadline:
                return None
    except (OSError, ValueError):
        return None
    return bytes(body)


WAITING_EVERY_S = 0.5  # how often a start still under way is reported (`waiting`)


def wait_ready(
    base: str,
    deadline: float,
    alive=lambda: True,
    path: str = "",
    api_key: str = "",
    waiting=lambda: None,
) -> tuple[str, dict]:
    """Poll `path`; by default /health (503 = still loading), falling back to /v1/models when
    there is no /health. `waiting()` is called every WAITING_EVERY_S while it is not ready."""
    fixed, path = bool(path), path or "/health"
    said = time.monotonic()
    while time.monotonic() < deadline:
        if time.monotonic() - said >= WAITING_EVERY_S:
            waiting()
            said = time.monotonic()
        if not alive():
            raise LaunchError("server exited before it was ready")
        status, body = probe(base + path, timeout=1.0, api_key=api_key)
        if status == 200:
            return path, body
        if status in (401, 403):
            raise LaunchError(
                f"server refused {base}{path} with HTTP {status}: it wants an API key "
                "(--api-key or OPENAI_API_KEY)" + (" and refused the one given" if api_key else "")
            )
        if status in (404, 405, 501) and path == "/health" and not fixed:
            path = "/v1/models"
            continue
        time.sleep(0.02)
    raise LaunchError(f"server not ready at {base}{path} in time")


def last_line(path: Path) -> str:
    """The last line a server wrote to its log (what it is doing while it starts)."""
    lines = [x for x in log_tail(path, 5).splitlines() if x.strip()]
    return lines[-1].strip() if lines else ""


def log_tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 64 * 1024))
        text = f.read().decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


class Launcher:
    """Context manager: `with Launcher(arm, log) as server:` starts cold and always cleans up."""

    def __init__(
        self,
        arm: Arm,
        log_path: Path,
        timeout_s: float | None = None,
        grace_s: float = 5.0,
        starting=lambda elapsed_s, line: None,
    ):
        self.arm, self.log_path = arm, log_path
        self.timeout_s, self.grace_s = timeout_s or arm.ready_timeout_s, grace_s
        self.starting = starting  # (seconds since launch, the log's last line) while it starts
        self.proc: subprocess.Popen | None = None
        self.mark = new_mark()  # in the server's environment, and its descendants'
        self.port = 0
        self.seen: dict[int, psutil.Process] = {}

    def __enter__(self) -> Server:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Server:
        self.port = free_port()
        argv = self.arm.command(self.port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with self.log_path.open("wb") as log, signals_deferred(), _LIVE_LOCK:
            if _closing.is_set():
                raise LaunchError("not started: the harness is stopping")
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    argv, cwd=self.arm.cwd, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                    env={**os.environ, **self.arm.environment, MARK: self.mark},
                )  # fmt: skip
            except OSError as exc:
                raise LaunchError(f"cannot start server {argv[0]!r}: {exc.strerror}") from None
            _LIVE.add(self)
        base = f"http://127.0.0.1:{self.port}"
        try:
            path, health = wait_ready(
                base,
                t0 + self.timeout_s,
                lambda: self.proc.poll() is None,
                self.arm.ready_path,
                self.arm.api_key,
                lambda: self.starting(time.monotonic() - t0, last_line(self.log_path)),
            )
        except LaunchError as exc:
            rc = self.proc.poll()
            why = f"server exited with code {rc} before it was ready" if rc is not None else exc
            raise LaunchError(str(why), log_tail(self.log_path)) from None
        startup = time.monotonic() - t0
        return Server(base, self.proc.pid, startup, health, path, self.log_path)

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def remember(self, procs: list[psutil.Process]) -> None:
        """Processes seen in the server's tree; killed at teardown even if they left the group."""
        self.seen.update((p.pid, p) for p in procs)

    def stop(self) -> None:
        """TERM the whole group, wait `grace_s`, then KILL the group and every process seen."""
        with signals_deferred():
            self._stop()

    def _stop(self) -> None:
        with _LIVE_LOCK:
            if self.proc is None:
                return
            proc, self.proc = self.proc, None
            _LIVE.discard(self)
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        self.remember(tree)
        _signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.grace_s)
        _signal_group(proc.pid, signal.SIGKILL)  # stragglers of the group, leader gone or not
        for p in self.seen.values():
            with contextlib.suppress(psutil.Error):
                p.kill()  # psutil refuses a pid that was reused by another process
        proc.wait()
        end_marked(self.mark)  # what left the group and the tree: a double fork, a daemon


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@atexit.register
def stop_all() -> None:
    """Stop every server this process started, and start no other until `reopen()`: what a
    verb does when it is interrupted while other threads are still starting servers."""
    _closing.set()
    with _LIVE_LOCK:
        live = list(_LIVE)
    for launcher in live:
        launcher.stop()


def reopen() -> None:
    _closing.clear()
