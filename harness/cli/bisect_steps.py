"""`harness bisect` in steps: what was asked (`Asked`), the search planned from it
(`plan_bisect`: the suite, the commits, the project, checked before anything is built), the
commits said (`--dry-run`), and the bisector that runs it, each step said as it ends."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console

from harness.arms.arms import ArmError
from harness.arms.project import Project, ProjectError, find_project
from harness.arms.worktrees import RefError, repo_root
from harness.bisect.bisect_report import step_row
from harness.bisect.bisector import Bisector, Step
from harness.bisect.commits import Commit, commit_info, first_parent_commits
from harness.cli.context import suite_here
from harness.cli.errors import InputError, input_error
from harness.cli.options import check_rounds
from harness.cli.outputs import OutputError, checked_summary, fresh_dir
from harness.escape import terminal
from harness.report.display import LiveProgress
from harness.runs.budget import Budget
from harness.runs.plan import Context, placed_devices
from harness.workload.suite import Suite, SuiteError, load_suite


@dataclass(frozen=True)
class Asked:
    """`harness bisect`'s options as click parsed them."""

    good_ref: str
    bad_ref: str
    suite_name: str | None
    metrics: tuple[str, ...]
    model: str | None
    flags: str | None
    rounds: int
    max_rounds: int
    isolated: bool
    api_key: str | None
    dry_run: bool
    project_file: Path | None
    residency: str | None
    devices: str | None
    budget_minutes: float | None
    out_dir: Path
    ready_timeout: float | None
    quiet: bool
    summary_file: Path | None


@dataclass(frozen=True)
class Search:
    suite: Suite
    repo: Path
    project: Project
    good: Commit
    commits: list[Commit]  # good's first-parent descendants up to bad, bad last
    budget_minutes: float | None


def plan_bisect(a: Asked) -> Search:
    """Everything `bisect` checks before it builds a commit; one `Error:` line (exit 2) if not."""
    check_rounds(a.rounds, a.max_rounds)
    try:
        suite = load_suite(suite_here(a.suite_name, a.project_file))
        repo = repo_root(Path.cwd())
        commits = first_parent_commits(repo, a.good_ref, a.bad_ref)
        good = commit_info(repo, a.good_ref)
        project = find_project(repo, a.project_file)
        project.variant(a.isolated)  # no [server.isolated] for --isolated: said now
        placed_devices(a.devices, project, {})  # a malformed --devices: said now
        if a.summary_file:
            checked_summary(a.summary_file)
    except (SuiteError, RefError, ProjectError, OutputError, ArmError) as e:
        raise input_error(e) from None
    if unknown := [m for m in a.metrics if m not in suite.gate]:
        gated = ", ".join(suite.gate)
        raise InputError(f"--metric {unknown[0]} is not gated by suite {suite.name} ({gated})")
    budget = a.budget_minutes or project.budget_minutes
    return Search(suite, repo, project, good, commits, budget)


def print_search(search: Search) -> None:
    """`--dry-run`: good, and the commits that would be searched; nothing built or started."""
    click.echo(terminal(f"good: {search.good.sha} {search.good.subject}"))
    for c in search.commits:
        role = "bad" if c is search.commits[-1] else "candidate"
        click.echo(terminal(f"{role}: {c.sha} {c.subject}"))


def bisector_for(search: Search, a: Asked, command: str, console: Console) -> Bisector:
    def announce(step: Step, followed: list[str]) -> None:
        row = step_row(step, followed)
        what = f"{row.ratio} {row.ci} {row.verdict}"
        said = f"{step.role} {step.head.short} {step.head.subject[:50]}: {what} -> {step.mark}"
        console.print(terminal(f"{said} ({step.wall_s:.0f} s)"), markup=False, highlight=False)

    try:
        logs = fresh_dir(a.out_dir / "logs" / f"bisect-{search.suite.name}")  # this one's own
    except OutputError as e:
        raise input_error(e) from None
    ctx = Context(search.suite, search.repo, search.project, a.model, a.flags, a.isolated,
                  a.api_key)  # fmt: skip
    return Bisector(
        ctx,
        logs,
        a.rounds,
        a.max_rounds,
        a.ready_timeout,
        command,
        progress=lambda label: LiveProgress(console, label, disabled=a.quiet),
        announce=announce,
        residency=a.residency,
        devices=a.devices,
        budget=Budget.from_start(search.budget_minutes) if search.budget_minutes else None,
    )
