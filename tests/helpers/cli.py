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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


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


def saved_result(folder: Path) -> dict:
    """The one result JSON a verb wrote into `folder` (its --out-dir), or {} where none is."""
    import json

    saved = [p for p in folder.glob("*.json") if not p.name.endswith(".summary.json")]
    return json.loads(saved[0].read_text()) if len(saved) == 1 else {}


def invalid_reasons(saved: dict) -> list[str]:
    """Every invalid reason of a saved result: a run JSON's runs, an A/B's rounds, a sweep's
    runs (each under "run")."""
    rounds = saved.get("rounds") if isinstance(saved.get("rounds"), list) else []  # sweep: a count
    runs = [rnd[arm] for rnd in rounds for arm in ("base", "head") if rnd.get(arm)]
    runs += [run.get("run", run) for run in saved.get("runs", []) if run]
    return [why for run in runs if run for why in run.get("invalid_reasons", [])]


def client_starved(saved: dict) -> bool:
    """True when the machine, not the server, made the result INVALID: every reason is the
    load client falling behind (a loaded machine that did not schedule it)."""
    reasons = invalid_reasons(saved)
    return bool(reasons) and all("the client fell behind" in why for why in reasons)


def valid_unless_starved(run: dict) -> bool:
    """A run is VALID, or INVALID only because the machine starved its load client."""
    return run["valid"] or client_starved({"runs": [run]})


def valid_attempt(attempt: Callable[[int], tuple[T, dict]]) -> tuple[T, dict]:
    """`attempt(1)` -> (outcome, saved result), and `attempt(2)` where the machine starved the
    load client (INVALID for that alone); skipped where it did both times: the machine, not
    the code under test, decided. Any other INVALID is returned for the test to fail on."""
    for n in (1, 2):
        r, saved = attempt(n)
        if not client_starved(saved):
            return r, saved
    pytest.skip(f"the machine starved the load client twice: {invalid_reasons(saved)[0]}")


def exit_agrees(r: Outcome | subprocess.CompletedProcess, saved: dict) -> None:
    """The exit code is what the saved result says: an A/B's comparison exit code, a run
    file's validity (0 valid, 2 INVALID). For a test whose subject is not the verdict: whether
    a loaded machine starved the client is the machine's, that the exit code says so is ours."""
    if "comparison" in saved:
        want = saved["comparison"]["exit_code"]
    else:
        want = 0 if all(run["valid"] for run in saved["runs"]) else 2
    assert r.returncode == want, r.stdout + r.stderr
