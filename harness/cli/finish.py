"""How every verb that judges ends (`ab`, `compare`, `report`, `sweep`, `bisect`), interrupted
or not: the verdict on the terminal first, then the report and the pull request's summary, then
the exit code: the verdict's, or the shell's for the signal that interrupted the verb. A report
or a summary that fails is one `error:` line; nothing after the verdict changes the exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import click

from harness.cli import signals
from harness.cli.errors import one_line
from harness.escape import terminal
from harness.report.summary import append_summary, summary_targets


@dataclass(frozen=True)
class Ending:
    verdict: str
    exit_code: int  # the verdict's
    show: Callable[[], None]  # the verdict on the terminal
    write_report: Callable[[], Path]  # the report; returns its path
    summary: Callable[[str | None], str]  # the PR summary's Markdown, given the report's path
    interrupted: bool = False  # then the exit code is the signal's: 130, 143, 129


def finish(ending: Ending, summary_file: Path | None = None) -> NoReturn:
    try:
        ending.show()
    except Exception as exc:  # noqa: BLE001 - the bare verdict still stands
        click.echo(f"verdict: {ending.verdict} (exit {ending.exit_code})")
        click.echo(f"error: verdict table not printed: {_said(exc)}", err=True)
    report = None
    try:
        report = ending.write_report()
    except Exception as exc:  # noqa: BLE001 - no report bug may change the gate's answer
        click.echo(f"error: report not written: {_said(exc)}", err=True)
    else:
        click.echo(f"report: {terminal(report)}")
    write_summary(lambda: ending.summary(str(report) if report else None), summary_file)
    sys.exit(signals.exit_code() if ending.interrupted else ending.exit_code)


def interrupted(what: str) -> NoReturn:
    """An interrupt before anything could be judged: `what` (where the finished runs are kept)
    and the signal's exit code."""
    click.echo(f"interrupted: every server was stopped; {terminal(what)}")
    sys.exit(signals.exit_code())


def write_summary(render: Callable[[], str], summary_file: Path | None) -> None:
    """The pull request's summary, where one is wanted; nothing it does changes a verdict."""
    if not (targets := summary_targets(summary_file)):
        return
    try:
        errors = append_summary(render(), targets)
    except Exception as exc:  # noqa: BLE001 - a summary bug must not change the exit code
        errors = [f"summary not written: {_said(exc)}"]
    for line in errors:
        click.echo(f"error: {line}", err=True)


def _said(exc: Exception) -> str:
    return f"{type(exc).__name__}: {one_line(exc)}"
