"""What a person sees: a live rich progress bar per phase while a run goes, then the summary
table of one or more runs and the verdicts on their counter expectations."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness import escape as shown
from harness.load.phase import Progress as PhaseProgress
from harness.load.record import RequestRecord
from harness.results.metrics import CATALOGUE


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
        self.task = self.start_task = None

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


def summary_table(runs: list[dict], title: str) -> Table:
    table = Table(title=escape(shown.terminal(title)), title_justify="left")  # names as they are
    table.add_column("metric")
    for i in range(len(runs)):
        table.add_column(f"run {i + 1}" if len(runs) > 1 else "value", justify="right")
    for m in CATALOGUE:
        table.add_row(m.heading, *(m.number(run["summary"].get(m.name)) for run in runs))
    table.add_row("sampled caught exact peak", *(_caught(run) for run in runs))
    table.add_row("verdict", *(_verdict(run) for run in runs))
    table.add_row("fingerprint", *(run["fingerprint"] for run in runs))
    return table


def print_run(console: Console, runs: list[dict]) -> None:
    """The table, then one line per expectation and per reason a run is invalid."""
    first = runs[0]
    model = first["server"].get("served_model") or first["arm"]["model"]
    title = f"{first['suite']['name']} on {first['arm']['kind']} arm ({model})"
    console.print(summary_table(runs, title))
    said = shown.terminal(f"prompt tokens counted by: {first['prompt_tokenizer']}")
    console.print(said, markup=False, highlight=False)
    for i, run in enumerate(runs):
        tag = f"run {i + 1}: " if len(runs) > 1 else ""
        for phase, result in run["phases"].items():
            for o in result["expect"]:
                delta = "-" if o["delta"] is None else f"{o['delta']:g}"
                note = f" ({o['note']})" if o["note"] else ""
                console.print(
                    shown.terminal(
                        f"{tag}expect [{phase}] {o['series']} {o['rule']}: "
                        f"{o['status'].upper()} delta={delta}{note}"
                    ),
                    markup=False, highlight=False,
                )  # fmt: skip
        for reason in run["invalid_reasons"]:
            console.print(f"[bold red]{tag}INVALID:[/] {escape(shown.terminal(reason))}")
        if run["server"].get("log_tail"):
            where = shown.terminal(f"{tag}server log tail ({run['server']['log_path']}):")
            console.print(where, markup=False, highlight=False)
            tail = shown.terminal(run["server"]["log_tail"], multiline=True)
            console.print(tail, markup=False, highlight=False)


def _caught(run: dict) -> str:
    flags = [p["memory"].get("sampled_caught_peak") for p in run["phases"].values()]
    known = [f for f in flags if f is not None]
    return "-" if not known else ("yes" if all(known) else "no")


def _verdict(run: dict) -> str:
    return {"ok": "VALID", "invalid": "INVALID", "crashed": "CRASHED"}.get(run["outcome"], "?")
