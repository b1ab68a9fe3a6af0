"""What a person sees while a run goes: a live rich progress bar per phase (its server's start,
then each phase's requests). What it ends with is report/terminal.py's."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from harness import escape as shown
from harness.load.phase import Progress as PhaseProgress
from harness.load.record import RequestRecord


class LiveProgress(PhaseProgress):
    """A rich progress bar per phase: requests done / total; while a server starts, the seconds
    since its launch and the last line of its log (a minute-long start shows what it does)."""

    def __init__(
        self, console: Console, label: str = "", disabled: bool = False, bar: Progress | None = None
    ) -> None:
        self.label, self.owner = label, bar is None  # a view shows on another's bar
        self.bar = bar or Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, disable=disabled,
        )  # fmt: skip
        self.task: TaskID | None = None
        self.start_task: TaskID | None = None

    def __enter__(self) -> LiveProgress:
        if self.owner:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owner:
            self.bar.stop()

    def view(self, label: str) -> LiveProgress:
        return LiveProgress(self.bar.console, label, bar=self.bar)

    def starting(self, elapsed_s: float, line: str) -> None:
        said = shown.terminal(f"{self.label}starting, {elapsed_s:.0f} s: {line}")[:160]
        if self.start_task is None:
            self.start_task = self.bar.add_task(escape(said), total=None)
        else:
            self.bar.update(self.start_task, description=escape(said))

    def phase_started(self, name: str, total: int) -> None:
        if self.start_task is not None:  # it is ready
            self.bar.remove_task(self.start_task)
            self.start_task = None
        said = escape(shown.terminal(f"{self.label}{name}"))  # a description is rich markup
        self.task = self.bar.add_task(said, total=total)

    def request_done(self, record: RequestRecord) -> None:
        if self.task is not None:
            self.bar.advance(self.task)
