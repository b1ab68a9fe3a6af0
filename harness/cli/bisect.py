"""`harness bisect`: name the commit that introduced a regression. Exit 0 when a first bad
commit is named, 2 when it cannot be (bad does not regress, skipped or unresolved commits in
the way, bad input)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.bisect.bisect import BisectError
from harness.bisect.bisect_report import headline, summary, write_bisect_report
from harness.bisect.bisector import Step
from harness.cli.bisect_steps import Asked, bisector_for, plan_bisect, print_search
from harness.cli.command_line import harness_command
from harness.cli.errors import EXIT_INVALID, input_error
from harness.cli.finish import Ending, finish, interrupted
from harness.cli.options import (
    SUITE_HELP,
    api_key_option,
    budget_option,
    devices_option,
    dry_run_option,
    project_option,
    report_options,
    residency_option,
)
from harness.escape import terminal
from harness.report.summary import bisect_summary
from harness.report.terminal import print_path
from harness.results.bisect_result import BisectResult
from harness.workload.suite import SuiteError


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
def bisect(**options):
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
    asked = Asked(**options)
    search = plan_bisect(asked)
    if asked.dry_run:
        return print_search(search)
    console = Console(stderr=True)
    command = harness_command()
    bisector = bisector_for(search, asked, command, console)
    good, commits, suite = search.good, search.commits, search.suite.name
    console.print(f"bisect: {len(commits)} first-parent commit(s) after {good.short}", markup=False)
    try:
        outcome = bisector.run(good, commits, tuple(asked.metrics))
    except (BisectError, RefError, ArmError, SuiteError, ProjectError) as e:
        raise input_error(e) from None
    except KeyboardInterrupt:
        if (partial := bisector.so_far(commits)) is None:
            interrupted(f"each step's runs are kept beside its logs in {bisector.log_dir}")
        console.print("interrupted: every server was stopped")
        data = replace(summary(partial, suite, good, command), interrupted=True)
        finish(bisect_ending(data, None, asked.out_dir, interrupted=True), asked.summary_file)
    data = summary(outcome, suite, good, command)
    finish(bisect_ending(data, outcome.final, asked.out_dir), asked.summary_file)


def bisect_ending(
    data: BisectResult, final: Step | None, out_dir: Path, interrupted: bool = False
) -> Ending:
    """A bisect that named its commit exits 0; one that could not (or was stopped), 2."""
    named = data.culprit is not None and not interrupted

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
