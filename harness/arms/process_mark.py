"""A mark in the environment of each server and build a verb starts, and so of every process
they start in turn, even one that left their process group and session (a double fork under
`setsid`): at teardown every live process carrying the mark is ended, so none outlives the
verb. Jenkins's ProcessTreeKiller finds a build's strays by its BUILD_ID cookie the same way."""

from __future__ import annotations

import contextlib
import time
import uuid

import psutil

MARK = "SERVEGATE_PROCESS_MARK"


def new_mark() -> str:
    return uuid.uuid4().hex


def marked(mark: str) -> list[psutil.Process]:
    """The live processes whose environment carries `mark` (this user's: others' cannot be
    read, nor started by this verb)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.environ().get(MARK) == mark:
                found.append(proc)
    return found


SCANS = 20  # at most, until two in a row find none
SCAN_GAP_S = 0.05


def end_marked(mark: str, grace_s: float = 2.0) -> int:
    """TERM every process carrying `mark`, KILL those alive after `grace_s`, and look again
    until two scans in a row find none (a process caught between fork and exec can hide its
    environment from one scan, and one just forked was not there for it); how many ended."""
    ended, empty = 0, 0
    for _ in range(SCANS):
        procs = marked(mark)
        if not procs:
            empty += 1
            if empty == 2:
                break
            time.sleep(SCAN_GAP_S)
            continue
        empty = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        _, alive = psutil.wait_procs(procs, timeout=grace_s)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=grace_s)
        ended += len(procs)
    return ended
