"""SIGTERM (what a CI runner sends to a cancelled or timed-out job) and SIGHUP (a closed
terminal) do what Ctrl-C does, in every verb: KeyboardInterrupt unwinds through each launcher's
teardown and each verb keeps what it measured. The exit status is the shell's for the signal:
130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP."""

from __future__ import annotations

import signal

_received: list[int] = []


def install() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)


def exit_code() -> int:
    """128 + the signal that interrupted this process (SIGINT when none was recorded).

    Every verb exits through here when interrupted, so this also clears CPython's record of a
    Ctrl-C that escaped the exec or eval of a string (dataclasses and namedtuple build their
    methods so, while a module is imported): caught or not, that record makes the interpreter
    end `python -m harness` by SIGINT itself, after the exit handlers, instead of with this
    code. A clean exec of a string clears it."""
    exec("")
    return 128 + (_received[-1] if _received else signal.SIGINT)


def _terminate(signum, frame) -> None:
    """Inside asyncio.run, SIGINT's handler cancels the load cleanly; raising here instead would
    land in whichever task happens to run. Elsewhere SIGTERM raises KeyboardInterrupt at once."""
    _received.append(signum)
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGINT)
