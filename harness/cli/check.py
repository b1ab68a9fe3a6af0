"""`harness check`: before the first gate, try the project file on one commit: build it, start
it, send one streamed request and say what came back, time one cold run of the suite, and print
the plan a gate would follow with what it would cost."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import click
from rich.console import Console

from harness.adopt.estimate import AT_ONCE, ONE_AT_A_TIME, TOGETHER, estimate
from harness.arms.arms import ArmError
from harness.arms.builds import build
from harness.arms.launcher import LaunchError, log_tail
from harness.arms.project import FILE_NAME, ProjectError
from harness.arms.worktrees import RefError, checkout, repo_root
from harness.cli.context import arm_context, suite_here
from harness.cli.errors import EXIT_INVALID, InputError, input_error, one_line, shown
from harness.cli.options import (
    SECONDS,
    SUITE_HELP,
    api_key_option,
    budget_option,
    check_rounds,
    devices_option,
    project_option,
    residency_option,
    rounds_options,
    workload_options,
)
from harness.cli.outputs import OutputError, fresh_dir, writable_dir
from harness.cli.plan_lines import rounds_line, servers_line
from harness.escape import terminal
from harness.report.display import LiveProgress
from harness.results.run import Run
from harness.runs.cold import measure_cold, server_log
from harness.runs.first_request import first_request
from harness.runs.measure import start_arm
from harness.runs.plan import Side, placed_devices, plan_arm, together
from harness.stats.sequential import Schedule
from harness.workload.suite import SuiteError, load_suite, override


@click.command()
@click.option(
    "--suite",
    "suite_name",
    default=None,
    metavar="NAME_OR_PATH",
    help=SUITE_HELP,
)
@click.option(
    "--ref", default="HEAD", show_default=True, metavar="REF", help="The commit to build and serve."
)
@click.option("--model", default=None, help="Model to serve [default: servegate.toml's, else "
              "the suite's].")  # fmt: skip
@click.option("--flags", default=None, help="Server flags, replacing the suite's.")
@rounds_options
@click.option(
    "--ready-timeout",
    type=SECONDS,
    default=None,
    help="Seconds the server may take to start [default: servegate.toml's ready_timeout, "
    "else 180].",
)
@click.option("--quiet", is_flag=True, help="No live progress display.")
@devices_option
@residency_option
@budget_option
@workload_options
@api_key_option
@project_option
def check(
    suite_name, ref, model, flags, rounds, max_rounds, ready_timeout, quiet, devices, residency,
    budget_minutes, clients, requests, prompt_tokens, max_tokens, rate, client_procs, api_key,
    project_file,
) -> None:  # fmt: skip
    """Try servegate.toml on one commit and say what a gate of it would cost.

    Builds REF as servegate.toml says (once per commit, cached as every verb's builds are),
    starts it, sends one streamed chat request and prints what came back (the first token's
    time, the tokens, the text), then times one cold run of the suite on it and prints the
    plan of `harness ab`: the arms, the suite, where and how many servers run at once, the
    rounds, and the minutes of one round and of the whole gate (the builds of both arms
    included). Exit 0 when all of that worked; 2 with one line (and the build's or the
    server's log tail) when the file, the build, the start, the request or the cold run failed.

    \b
    harness check
    harness check --suite smoke --requests 4
    harness check --ref main --devices 0,1 --budget-minutes 45
    """
    max_rounds, extend_to = check_rounds(rounds, max_rounds)
    console = Console(stderr=True)
    _project_here(project_file)
    try:
        suite_name = suite_here(suite_name, project_file)
        suite = override(load_suite(suite_name), clients=clients, requests=requests,
                         prompt_tokens=prompt_tokens, max_tokens=max_tokens, rate=rate,
                         client_procs=client_procs)  # fmt: skip
        side = Side(ref)
        ctx = arm_context({"head": side}, suite, model, flags, False, api_key, False, project_file)
        plan = plan_arm("head", side, ctx)
        plans = {"base": replace(plan, name="base"), "head": plan}
        devices = placed_devices(devices, ctx.project, plans)
        if devices:  # the check runs where the gate's first arm would
            plan = replace(plan, arm=replace(plan.arm, device=devices[0]))
        project, repo, planned = ctx.project, ctx.repo, plan.checkout
        if project is None or repo is None or planned is None:  # a git ref's arm has all three
            raise ProjectError(f"no {FILE_NAME} to check")
        budget_minutes = budget_minutes or project.budget_minutes
        writable_dir(Path("results") / "logs" / "check")
        built = build(project, checkout(repo, planned.ref))  # planned: now made
        log_dir = fresh_dir(Path("results") / "logs" / "check")  # this check's own
    except (SuiteError, ArmError, RefError, ProjectError, OutputError) as exc:
        raise input_error(exc) from None
    click.echo(terminal(f"{plan.desc.label}: {_built(built)}"))
    _ask(console, plan, log_dir, ready_timeout, quiet)
    run = _cold_run(console, suite, plan, log_dir, ready_timeout, quiet)
    looks = Schedule.plan(rounds, max_rounds, block=len(devices) if len(devices) > 1 else 1).looks
    _say_gate(run, suite.name, ref, plans, residency, devices, looks, extend_to)
    _cost(run, plans, looks, built, together(plans, residency, devices), devices, budget_minutes)
    click.echo(f"logs: {log_dir}")


def _cold_run(console: Console, suite, plan, log_dir: Path, ready_timeout, quiet: bool) -> Run:
    """One cold run of the suite on the planned arm; a crash or an invalid run ends the check."""
    progress = lambda label: LiveProgress(console, label, disabled=quiet)  # noqa: E731
    run, crash = measure_cold(suite, plan, log_dir, round_no=1, label="cold run ",
                              progress=progress, ready_timeout_s=ready_timeout)  # fmt: skip
    if crash or run is None:
        why = crash.message if crash else "no run"
        _failed(
            console, f"the cold run of {suite.name} failed: {why}", crash.log_tail if crash else ""
        )
    if not run.valid:
        reasons = "; ".join(run.invalid_reasons) or "no reason given"
        _failed(console, f"the cold run of {suite.name} was invalid: {reasons}", "")
    return run


def _built(built) -> str:
    if built is None:
        return "no build step"
    if built.cached:
        return "built before (cached): its time is not counted below"
    return f"built in {built.seconds:.1f} s"


def _times(run: Run) -> tuple[float, float]:
    """(the cold run's seconds, its server's seconds to start)."""
    return run.duration_s or 0.0, (run.server.startup_s if run.server else None) or 0.0


def _say_gate(run: Run, suite: str, ref, plans, residency, devices, looks, extend_to) -> None:
    """The cold run's length, then the plan of `harness ab` on this project."""
    seconds, start = _times(run)
    click.echo(f"cold run: {seconds:.1f} s ({start:.1f} s to start, then the load)")
    click.echo(terminal(f"arms: base (the pull request's base) and head ({ref}), each built "
                        "once and started cold in every round"))  # fmt: skip
    click.echo(terminal(f"suite: {suite}"))
    click.echo(terminal(f"servers: {servers_line(plans, residency, devices)}"))
    click.echo(rounds_line(looks, extend_to))


def _ask(console: Console, plan, log_dir: Path, ready_timeout: float | None, quiet: bool) -> None:
    """Start the arm, send it one streamed chat request, say what came back, stop it; a start
    or a request that fails is exit 2 with the server log's tail."""
    label, arm = plan.desc.label, plan.arm
    try:
        with LiveProgress(console, "start ", disabled=quiet) as progress:
            started = start_arm(arm, server_log(log_dir, 0, "check"), ready_timeout, progress)
    except LaunchError as exc:
        _failed(console, f"{label} did not start: {exc}", exc.log_tail)
    try:
        server = started.server
        ready = f"ready in {server.startup_s:.1f} s at {server.url}{server.ready_path}"
        click.echo(terminal(ready))
        answer = first_request(server.url, arm.model, arm.api_key)
    finally:
        exit_code = started.launcher.exit_code()
        started.launcher.stop()
    rec = answer.record
    if not rec.ok or rec.first_token is None:
        why = rec.error or (f"HTTP {rec.status}" if rec.status != 200 else "no token came back")
        gone = f" (the server exited with code {exit_code})" if exit_code is not None else ""
        tail = log_tail(started.launcher.log_path)
        _failed(console, f"the request to {label} failed{gone}: {why}", tail)
    first_ms, all_ms = (rec.ttft_s or 0.0) * 1000, (rec.e2e_s or 0.0) * 1000
    click.echo(terminal(
        f"request: model {answer.model}: {rec.tokens} token(s), the first after "
        f"{first_ms:.0f} ms, {all_ms:.0f} ms in all: {answer.text.strip()!r}"
    ))  # fmt: skip


def _cost(run: Run, plans: dict, looks: tuple, built, at_once_together: bool, devices: tuple,
          budget_minutes: float | None) -> None:  # fmt: skip
    """The minutes of one round and of the gate, from the cold run's time."""
    how = AT_ONCE if len(devices) > 1 else TOGETHER if at_once_together else ONE_AT_A_TIME
    build_s = built.seconds if built else 0.0
    cost = estimate(*_times(run), how, looks[0], looks[-1],
                    build_s, len(plans))  # fmt: skip
    click.echo(f"one round: {_minutes(cost.round_s)} ({len(plans)} arms, {how})")
    builds = (
        "no builds" if built is None
        else "the builds are cached here: not counted" if built.cached
        else f"{len(plans)} builds of {build_s:.0f} s included"
    )  # fmt: skip
    click.echo(f"gate: {_minutes(cost.first_look_s)} at {looks[0]} rounds, "
               f"{_minutes(cost.most_s)} at {looks[-1]} ({builds})")  # fmt: skip
    if budget_minutes:
        fits = cost.most_s <= budget_minutes * 60
        click.echo(f"budget: {budget_minutes:g} min: " + (
            f"holds all {looks[-1]} rounds" if fits
            else "ends before the last look: the gate stops at the rounds that fit"
        ))  # fmt: skip


def _project_here(project_file: Path | None) -> None:
    """A repository with a project file, or the one line that says which is missing."""
    try:
        root = repo_root(Path.cwd())
    except RefError:
        raise InputError(
            "not in a git repository: harness check builds and serves a commit of the "
            "repository it runs in"
        ) from None
    if project_file is None and not (root / FILE_NAME).is_file():
        raise InputError(f"no {FILE_NAME} in {root}: `harness init` writes one (docs/projects.md)")


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def _failed(console: Console, message: str, tail: str) -> NoReturn:
    """One error line, the server log's tail below it, exit 2 (as `harness run` ends)."""
    console.print(f"[bold red]error:[/] {shown(one_line(message))}", highlight=False,
                  soft_wrap=True)  # fmt: skip
    if tail:
        tail = terminal(tail, multiline=True)
        console.print(f"server log tail:\n{tail}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(EXIT_INVALID)
