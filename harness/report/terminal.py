"""What the terminal shows at the end: an A/B's verdict (the table of gated metrics, a line for
each metric that moved or changed, the warnings, a crashed arm's log tail, and the one
`verdict:` line scripts grep), or a run's summary table and expectations. Text from elsewhere
(names, messages, a log) is escaped for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.escape import terminal
from harness.report.headline import MOVED, headline
from harness.report.tables import fmt_value
from harness.results.ab_result import ABResult
from harness.results.bisect_result import BisectResult
from harness.results.comparison import MetricResult
from harness.results.metrics import CATALOGUE, Method
from harness.results.run import Run, ServedArm


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.3f}" if abs(x) < 1000 else f"{x:,.0f}"


def interval(m: MetricResult, named: bool = False) -> str:
    """The ratio's 95% CI, or `exact (simulated)` for a simulated A/B's (no sampling)."""
    if m.method == Method.SIMULATED:
        return "exact (simulated)"
    ci = f"[{fmt(m.ci_low)}, {fmt(m.ci_high)}]"
    return f"95% CI {ci}" if named else ci


def _say(console: Console, line: str, soft_wrap: bool = False) -> None:
    console.print(line, highlight=False, markup=False, soft_wrap=soft_wrap)


def shown(text: object) -> str:
    """Text from elsewhere as a rich table cell: one line, its `[...]` not read as markup."""
    return escape(terminal(text))


def print_verdict(console: Console, ab: ABResult) -> None:
    comp = ab.comparison
    said = headline(comp)
    table = Table(title=shown(f"{ab.suite}: {ab.base.label} vs {ab.head.label}"))
    for col in ("metric", "base", "head", "ratio", "95% CI", "tol", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for m in comp.metrics:
        table.add_row(
            shown(m.name),
            fmt_value(m.name, m.base_value),  # as the report shows them
            fmt_value(m.name, m.head_value),
            fmt(m.ratio),
            interval(m),
            f"{m.tolerance:.0%}",
            shown(m.verdict),
        )
    console.print(table)
    changed = dict(said.changed)
    for m in comp.metrics:
        if m.verdict in MOVED:
            ratio = f"{fmt(m.ratio)}x head/base, {interval(m, True)}"
            _say(console, terminal(f"{m.verdict}: {m.name} {ratio}"))
        elif m.name in changed:
            _say(console, terminal(f"PASS: {m.name} {changed[m.name]}"))
    for line in said.invalid + said.warnings:
        _say(console, f"- {terminal(line)}")
    if crash := ab.crash:
        tail = terminal(crash.log_tail, multiline=True)
        _say(console, f"crash: {terminal(crash.message)}\n{tail}")
    _say(console, terminal(said.line), soft_wrap=True)  # one line at any width: scripts grep it


def summary_table(runs: list[Run], title: str) -> Table:
    table = Table(title=escape(terminal(title)), title_justify="left")  # names as they are
    table.add_column("metric")
    for i in range(len(runs)):
        table.add_column(f"run {i + 1}" if len(runs) > 1 else "value", justify="right")
    for m in CATALOGUE:
        table.add_row(m.heading, *(m.number(run.summary.get(m.name)) for run in runs))
    table.add_row("sampled caught exact peak", *(_caught(run) for run in runs))
    table.add_row("verdict", *(_run_verdict(run) for run in runs))
    table.add_row("fingerprint", *(run.fingerprint or "" for run in runs))
    return table


def print_run(console: Console, runs: list[Run]) -> None:
    """The table, then one line per expectation and per reason a run is invalid."""
    first = runs[0]
    arm = first.arm or ServedArm()
    model = (first.server and first.server.served_model) or arm.model
    suite = first.suite.name if first.suite else "?"
    console.print(summary_table(runs, f"{suite} on {arm.kind} arm ({model})"))
    _say(console, terminal(f"prompt tokens counted by: {first.prompt_tokenizer}"))
    for i, run in enumerate(runs):
        tag = f"run {i + 1}: " if len(runs) > 1 else ""
        for phase, result in (run.phases or {}).items():
            for o in result.expect or []:
                delta = "-" if o.delta is None else f"{o.delta:g}"
                note = f" ({o.note})" if o.note else ""
                said = f"{o.series} {o.rule}: {(o.status or '').upper()} delta={delta}{note}"
                _say(console, terminal(f"{tag}expect [{phase}] {said}"))
        for reason in run.invalid_reasons:
            console.print(f"[bold red]{tag}INVALID:[/] {escape(terminal(reason))}")
        if run.server and run.server.log_tail:
            _say(console, terminal(f"{tag}server log tail ({run.server.log_path}):"))
            _say(console, terminal(run.server.log_tail, multiline=True))


def _caught(run: Run) -> str:
    flags = [p.memory and p.memory.sampled_caught_peak for p in (run.phases or {}).values()]
    known = [f for f in flags if f is not None]
    return "-" if not known else ("yes" if all(known) else "no")


def _run_verdict(run: Run) -> str:
    return {"ok": "VALID", "invalid": "INVALID", "crashed": "CRASHED"}.get(run.outcome or "", "?")


def print_path(console: Console, data: BisectResult) -> None:
    """A bisect's path: one row per A/B, then each commit skipped or left unresolved."""
    ends = [c.short if c else "?" for c in (data.good, data.bad)]
    table = Table(title=shown(f"bisect {data.suite}: {ends[0]}..{ends[1]}"))
    for col in ("#", "role", "commit", "subject", "ratio", "95% CI", "verdict", "mark", "wall"):
        table.add_column(col, justify="right" if col in ("#", "wall") else "left")
    for i, s in enumerate(data.path):
        head = s.head
        table.add_row(
            str(i),
            s.role,
            shown(head.short if head else ""),
            shown(head.subject[:40] if head else ""),
            s.ratio,
            s.ci,
            s.verdict,
            s.mark,
            f"{s.wall_s} s",
        )
    console.print(table)
    for s in data.skipped + data.unresolved:
        said = terminal(f"{s.mark}: {s.head.short if s.head else '?'} {s.reason}")
        console.print(said, markup=False)
