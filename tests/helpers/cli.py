"""The harness's command line as the tests run it: `harness` is `python -m harness ARGS` as a
real process (waited for), `start_harness` the same process not waited for (to signal it or
run two at once), `cli` the command line in this process (no interpreter start: for checks of
what it says, not of the process), and `one_line_error` the exit-2 contract on bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def environment(env: Mapping[str, str | None] | None, cache: Path | None) -> dict[str, str]:
    """This process's environment with `env` laid over it (a None value removes the variable)
    and SERVEGATE_CACHE set to `cache` when given."""
    merged = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    if cache is not None:
        merged["SERVEGATE_CACHE"] = str(cache)
    return merged


def outside_git(folder: Path) -> dict[str, str]:
    """For `env`: a PATH that holds no git (folder/no-bin, which holds nothing) and a cache of
    the run's own, for a run that may need neither git nor anything else on PATH."""
    return {"PATH": str(folder / "no-bin"), "SERVEGATE_CACHE": str(folder / "cache")}


def harness(
    *args: str,
    cwd: Path,
    env: Mapping[str, str | None] | None = None,
    cache: Path | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """`python -m harness ARGS` in `cwd`, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=environment(env, cache),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_harness(
    *args: str,
    cwd: Path,
    env: Mapping[str, str | None] | None = None,
    cache: Path | None = None,
    merge_stderr: bool = False,
) -> subprocess.Popen:
    """`python -m harness ARGS` in `cwd`, started and not waited for, stdout (and stderr, into
    stdout when `merge_stderr`) piped as text. SIGINT is not ignored, as when a person starts
    it, even when the tests run in a background job (whose shell makes children ignore SIGINT,
    and Python keeps that)."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=environment(env, cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, cwd: Path) -> Outcome:
    """The command line in this process (importing the harness takes seconds per process on a
    loaded machine): what `python -m harness ARGS` does, run in `cwd`. An exception that escapes
    main() is shown as a traceback with exit 1, as Python itself would."""
    from click.testing import CliRunner

    from harness.cli.main import main

    old = Path.cwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(main, list(args), prog_name="harness")
    finally:
        os.chdir(old)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        tb = "".join(traceback.format_exception(r.exception))
        return Outcome(1, r.stdout, r.stderr + "Traceback (most recent call last):\n" + tb)
    return Outcome(r.exit_code, r.stdout, r.stderr)


def one_line_error(out: Outcome | subprocess.CompletedProcess, needle: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert len(lines) == 1 and lines[0].startswith("Error: "), out.stderr
    assert needle in lines[0], lines[0]
