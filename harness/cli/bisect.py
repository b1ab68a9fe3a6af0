"""`harness bisect`: name the commit that introduced a regression. Exit 0 when a first bad
commit is named, 2 when it cannot be (bad does not regress, skipped or unresolved commits in
the way, bad input)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError, find_project
from harness.arms.worktrees import RefError, repo_root
from harness.bisect.bisect import BisectError
from harness.bisect.bisect_report import headline, step_row, summary, write_bisect_report
from harness.bisect.bisector import Bisector, Step
from harness.bisect.commits import commit_info, first_parent_commits
from harness.cli.command_line import harness_command
from harness.cli.errors import EXIT_INVALID, InputError, input_error, shown
from harness.cli.finish import Ending, finish, interrupted
from harness.cli.options import (
    SUITE_HELP,
    api_key_option,
    budget_option,
    check_rounds,
    devices_option,
    dry_run_option,
    project_option,
    report_options,
    residency_option,
    suite_here,
)
from harness.cli.outputs import OutputError, checked_summary, fresh_dir
from harness.escape import terminal
from harness.report.display import LiveProgress
from harness.report.summary import bisect_summary
from harness.runs.budget import Budget
from harness.runs.plan import Context, placed_devices
from harness.workload.suite import SuiteError, load_suite


def print_path(console: Console, data: dict) -> None:
    table = Table(title=f"bisect {data['suite']}: {data['good']['short']}..{data['bad']['short']}")
    for col in ("#", "role", "commit", "subject", "ratio", "95% CI", "verdict", "mark", "wall"):
        table.add_column(col, justify="right" if col in ("#", "wall") else "left")
    for i, s in enumerate(data["path"]):
        table.add_row(
            str(i),
            s["role"],
            shown(s["head"]["short"]),
            shown(s["head"]["subject"][:40]),
            s["ratio"],
            s["ci"],
            s["verdict"],
            s["mark"],
            f"{s['wall_s']} s",
        )
    console.print(table)
    for s in data["skipped"] + data["unresolved"]:
        said = terminal(f"{s['mark']}: {s['head']['short']} {s['reason']}")
        console.print(said, markup=False)


@click.command()
@click.option(
    "--good", "good_ref", required=True, metavar="REF", help="A commit without the regression."
)
@click.option(
    "--bad",
    "bad_ref",
    default="HEAD",
    show_default=True,
    metavar="REF",
    help="A commit with it; good must be on bad's first-parent chain.",
)
@click.option(
    "--suite",
    "suite_name",
    default=None,
    metavar="NAME_OR_PATH",
    help=SUITE_HELP,
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Follow this gated metric (repeatable) [default: every gated metric on "
    "which bad regresses against good].",
)
@click.option("--model", default=None, help="Model for every arm [default: the suite's].")
@click.option("--flags", default=None, help="Server flags for every arm, replacing the suite's.")
@click.option(
    "--rounds",
    type=click.IntRange(2, 100),
    default=5,
    show_default=True,
    help="Rounds per step, each starting both arms cold (as in `harness ab`).",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(2, 200),
    default=9,
    show_default=True,
    help="A step still INCONCLUSIVE gets two rounds more up to this, then is reported unresolved.",
)
@click.option(
    "--isolated",
    is_flag=True,
    help="Build and serve each commit as servegate.toml's [server.isolated] says.",
)
@api_key_option
@dry_run_option
@project_option
@residency_option
@devices_option
@budget_option
@report_options
def bisect(
    good_ref,
    bad_ref,
    suite_name,
    metrics,
    model,
    flags,
    rounds,
    max_rounds,
    isolated,
    api_key,
    dry_run,
    project_file,
    residency,
    devices,
    budget_minutes,
    out_dir,
    ready_timeout,
    quiet,
    summary_file,
):
    """Name the commit that introduced a regression (binary search, one A/B per step).

    \b
    harness bisect --good main~8 --bad main --suite boundary-spill
    harness bisect --good origin/main~20 --suite long-transient --metric peak_rss_bytes

    First confirms that bad regresses against good (else exit 2 with the reason), then
    halves bad's first-parent history: each step A/Bs one commit against good with the same
    rounds and statistics. It is bad when a followed metric regresses, good when each one
    passes or its CI excludes bad's confirmed regression (docs/ci.md). A commit that cannot
    be built, started or served is skipped; one still undecided after --max-rounds is
    unresolved; neither is guessed. Prints "first bad commit: SHA SUBJECT" and writes
    results/DATE-bisect-SUITE-GOOD-BAD.md with the path and the culprit's A/B against its
    parent. With --budget-minutes every A/B plans its rounds inside the search's time, and the
    search stops when the next A/B would not end inside it, naming the commits left. Exit 0
    when a first bad commit is named, 2 when it cannot be.
    """
    check_rounds(rounds, max_rounds)
    console = Console(stderr=True)
    try:
        suite_name = suite_here(suite_name, project_file)
        suite = load_suite(suite_name)
        repo = repo_root(Path.cwd())
        commits = first_parent_commits(repo, good_ref, bad_ref)
        good = commit_info(repo, good_ref)
        project = find_project(repo, project_file)
        project.variant(isolated)  # no [server.isolated] for --isolated: said now
        budget_minutes = budget_minutes or project.budget_minutes
        placed_devices(devices, project, {})  # a malformed --devices: said now
        if summary_file:
            checked_summary(summary_file)
    except (SuiteError, RefError, ProjectError, OutputError, ArmError) as e:
        raise input_error(e) from None
    if unknown := [m for m in metrics if m not in suite.gate]:
        gated = ", ".join(suite.gate)
        raise InputError(f"--metric {unknown[0]} is not gated by suite {suite.name} ({gated})")
    if dry_run:  # what would be searched; nothing built or started
        click.echo(terminal(f"good: {good.sha} {good.subject}"))
        for c in commits:
            click.echo(
                terminal(f"{'bad' if c is commits[-1] else 'candidate'}: {c.sha} {c.subject}")
            )
        return
    command = harness_command()

    def announce(step: Step, followed: list[str]) -> None:
        row = step_row(step, followed)
        what = f"{row['ratio']} {row['ci']} {row['verdict']}"
        console.print(
            terminal(
                f"{step.role} {step.head.short} {step.head.subject[:50]}: {what} -> "
                f"{step.mark} ({step.wall_s:.0f} s)"
            ),
            markup=False,
            highlight=False,
        )

    try:
        logs = fresh_dir(out_dir / "logs" / f"bisect-{suite.name}")  # this bisect's own
    except OutputError as e:
        raise input_error(e) from None
    bisector = Bisector(
        Context(suite, repo, project, model, flags, isolated, api_key),
        logs,
        rounds,
        max_rounds,
        ready_timeout,
        command,
        progress=lambda label: LiveProgress(console, label, disabled=quiet),
        announce=announce,
        residency=residency,
        devices=devices,
        budget=Budget.from_start(budget_minutes) if budget_minutes else None,
    )
    console.print(f"bisect: {len(commits)} first-parent commit(s) after {good.short}", markup=False)
    try:
        outcome = bisector.run(good, commits, tuple(metrics))
    except (BisectError, RefError, ArmError, SuiteError, ProjectError) as e:
        raise input_error(e) from None
    except KeyboardInterrupt:
        if (partial := bisector.so_far(commits)) is None:
            interrupted(f"each step's runs are kept beside its logs in {logs}")
        console.print("interrupted: every server was stopped")
        data = summary(partial, suite.name, good, command) | {"interrupted": True}
        finish(bisect_ending(data, None, out_dir, interrupted=True), summary_file)
    data = summary(outcome, suite.name, good, command)
    finish(bisect_ending(data, outcome.final, out_dir), summary_file)


def bisect_ending(data: dict, final, out_dir: Path, interrupted: bool = False) -> Ending:
    """A bisect that named its commit exits 0; one that could not (or was stopped), 2."""
    named = data.get("culprit") is not None and not interrupted

    def show() -> None:
        out = Console(width=140)
        print_path(out, data)
        out.print(terminal(headline(data)), markup=False, highlight=False)

    return Ending(
        "NAMED" if named else "INVALID",
        0 if named else EXIT_INVALID,
        show=show,
        write_report=lambda: write_bisect_report(data, final, out_dir),
        summary=lambda report: bisect_summary(data, report),
        interrupted=interrupted,
    )
