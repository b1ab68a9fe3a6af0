"""`harness ab`, `harness compare` and `harness report`: the gate's command line.
Exit codes: 0 pass, 1 regression, 2 invalid run, infrastructure failure or server crash."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console
from rich.table import Table

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.cli.command_line import harness_command
from harness.cli.errors import InputError, input_error, shown
from harness.cli.finish import Ending, finish, interrupted
from harness.cli.options import (
    COSTS,
    SUITE_HELP,
    api_key_option,
    arm_context,
    budget_option,
    check_rounds,
    devices_option,
    dry_run_option,
    inconclusive_option,
    project_option,
    quiet_wait_option,
    report_options,
    residency_option,
    rounds_options,
    side_options,
    sides_from,
    suite_here,
    workload_options,
)
from harness.cli.outputs import (
    OutputError,
    checked_summary,
    fresh_dir,
    writable_dir,
)
from harness.cli.plan_lines import client_line, print_plan, rounds_line
from harness.escape import terminal
from harness.report.ab_report import to_plain, write_report
from harness.report.display import LiveProgress
from harness.report.sentences import (
    clear_pass,
    gate_warnings,
    look_line,
    trade_off,
    verdict_words,
)
from harness.report.summary import ab_summary
from harness.report.tables import fmt_value
from harness.results.errors import ComparisonError
from harness.results.metrics import Method
from harness.results.saved import load_result
from harness.results.verdicts import exit_meaning, is_simulated
from harness.runs.ab import ABRunner, ab_result, finished
from harness.runs.budget import Budget, search_within
from harness.runs.offline import compare_saved
from harness.runs.plan import (
    default_refs,
    label_arms,
    placed_devices,
    plan_arm,
    together,
    unsampled_memory,
)
from harness.sim.simulated_ab import SimulatedABRunner
from harness.sim.workload import SimError
from harness.stats.compare import judged_again
from harness.stats.sequential import Schedule
from harness.workload.suite import SuiteError, load_suite, override


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.3f}" if abs(x) < 1000 else f"{x:,.0f}"


def _interval(m: dict, named: bool = False) -> str:
    """The ratio's 95% CI, or `exact (simulated)` for a simulated A/B's (no sampling)."""
    if m.get("method") == Method.SIMULATED:
        return "exact (simulated)"
    ci = f"[{fmt(m['ci_low'])}, {fmt(m['ci_high'])}]"
    return f"95% CI {ci}" if named else ci


def print_verdict(console: Console, ab: dict) -> None:
    comp = ab["comparison"]
    said = f"{ab['suite']}: {ab['base']['label']} vs {ab['head']['label']}"
    table = Table(title=shown(said))
    for col in ("metric", "base", "head", "ratio", "95% CI", "tol", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for m in comp["metrics"]:
        ci = _interval(m)
        table.add_row(
            shown(m["name"]),
            fmt_value(m["name"], m["base_value"]),  # as the report shows them
            fmt_value(m["name"], m["head_value"]),
            fmt(m["ratio"]),
            ci,
            f"{m['tolerance']:.0%}",
            shown(m["verdict"]),
        )
    console.print(table)
    for m in comp["metrics"]:
        if str(m["verdict"]) in ("REGRESSION", "IMPROVEMENT", "INCONCLUSIVE"):
            console.print(
                terminal(
                    f"{m['verdict']}: {m['name']} {fmt(m['ratio'])}x head/base, "
                    f"{_interval(m, True)}"
                ),
                highlight=False,
                markup=False,
            )
        elif line := clear_pass(m):
            console.print(line, highlight=False)
    for line in comp["invalid"] + gate_warnings(comp):
        console.print(f"- {terminal(line)}", highlight=False, markup=False)
    if ab.get("crash"):
        console.print(
            f"crash: {terminal(ab['crash']['message'])}\n"
            + terminal(ab["crash"].get("log_tail", ""), multiline=True),
            markup=False,
            highlight=False,
        )
    code = comp["exit_code"]
    trade = trade_off(comp)  # what paid for what, right after the verdict
    said = f"{verdict_words(comp)}: {trade}" if trade else comp["verdict"]
    console.print(  # one line whatever the terminal's width: scripts grep it
        terminal(
            f"verdict: {said} (exit {code}: "
            f"{exit_meaning(code, is_simulated(comp), comp['verdict'])})"
        ),
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def ab_ending(result: dict, out_dir: Path, interrupted: bool = False) -> Ending:
    """How an A/B (or an offline compare, or a re-rendered report) ends."""
    comp = result["comparison"]
    return Ending(
        comp["verdict"],
        comp["exit_code"],
        show=lambda: print_verdict(Console(width=120), result),
        write_report=lambda: write_report(result, out_dir),
        summary=lambda report: ab_summary(to_plain(result), report),
        interrupted=interrupted,
    )


@click.command()
@click.option(
    "--base",
    "base_ref",
    default=None,
    metavar="REF",
    help="Git ref served by the base arm [default: HEAD].",
)
@click.option(
    "--head",
    "head_ref",
    default=None,
    metavar="REF",
    help="Git ref served by the head arm; WORKTREE (or .) = the working tree with "
    "its uncommitted changes [default: WORKTREE].",
)
@click.option(
    "--suite",
    "suite_name",
    default=None,
    metavar="NAME_OR_PATH",
    help=SUITE_HELP,
)
@click.option("--model", default=None, help="Model for both arms [default: the suite's].")
@click.option("--flags", default=None, help="Server flags for both arms, replacing the suite's.")
@side_options
@rounds_options
@click.option("--null-arm", is_flag=True, help="Add a second base arm per round (noise floor).")
@click.option(
    "--sim",
    "sim_costs",
    type=COSTS,
    default=None,
    help="Simulate instead of serving: each arm's own scheduler (its ref and flags) on a "
    "virtual clock priced by this cost model (a file from harness sim calibrate, or "
    "HARDWARE:SHAPE[:WEIGHTS], a roofline such as h200:llama-3-8b); one deterministic run "
    "per arm, gated by the tolerances without rounds (docs/simulation.md).",
)
@click.option(
    "--isolated",
    is_flag=True,
    help="Build and serve each git ref as servegate.toml's [server.isolated] says (this "
    "repository: its own virtual environment, built once per sha).",
)
@workload_options
@api_key_option
@dry_run_option
@project_option
@residency_option
@devices_option
@budget_option
@inconclusive_option
@quiet_wait_option
@report_options
def ab(
    base_ref,
    head_ref,
    suite_name,
    model,
    flags,
    rounds,
    max_rounds,
    null_arm,
    sim_costs,
    isolated,
    api_key,
    dry_run,
    project_file,
    residency,
    devices,
    budget_minutes,
    inconclusive,
    quiet_wait_s,
    out_dir,
    ready_timeout,
    quiet,
    summary_file,
    clients,
    requests,
    prompt_tokens,
    max_tokens,
    rate,
    client_procs,
    **side_opts,
):
    """A/B two builds or two configurations under the same load and gate on the result.

    \b
    harness ab --base main --head HEAD
    harness ab                                  # HEAD vs the working tree, as git diff
    harness ab --head-flags "--max-batch-prefill-tokens 2048" --suite boundary-spill
    harness ab --base-cmd "llama-server -m a.gguf --port {port}" \\
               --head-cmd "llama-server -m b.gguf --port {port}"
    harness ab --base-url http://127.0.0.1:8000 --head-url http://127.0.0.1:8001

    Each of R rounds starts every arm cold (rotating order), fires the suite's load and
    samples memory; per metric the head/base ratio gets a 95% CI and a verdict. Writes
    results/DATE-SUITE-BASE-vs-HEAD.md (+ .json, plots) under the current folder. Exit 0
    pass (improvements and inconclusive-with-warning included), 1 regression (one that bought
    an improvement is said as a trade-off), 2 invalid run, infra failure, crash, failed build
    or bad input. Git refs need the repository and its servegate.toml (docs/projects.md),
    which says how a commit is built (once per sha) and served; command and URL arms need
    neither.
    """
    max_rounds, extend_to = check_rounds(rounds, max_rounds)
    console = Console(stderr=True)
    try:
        sides = default_refs(sides_from(side_opts, base_ref, head_ref))
        suite_name = suite_here(suite_name, project_file)
        suite = override(load_suite(suite_name), clients=clients, requests=requests,
                         prompt_tokens=prompt_tokens, max_tokens=max_tokens, rate=rate,
                         client_procs=client_procs)  # fmt: skip
        stamp_dir = out_dir / "logs" / suite.name
        if not dry_run:  # a dry run writes nothing, not even a probe
            writable_dir(out_dir)
            writable_dir(stamp_dir)
        if summary_file:
            checked_summary(summary_file)
        ctx = arm_context(sides, suite, model, flags, isolated, api_key, not dry_run, project_file)
        plans = {n: plan_arm(n, s, ctx) for n, s in sides.items()}
        if null_arm:
            plans["null"] = plan_arm("null", sides["base"], ctx)
        label_arms(plans, sides)
        devices = placed_devices(devices, ctx.project, plans)
        budget_minutes = budget_minutes or (ctx.project.budget_minutes if ctx.project else None)
        inconclusive = inconclusive or (ctx.project.inconclusive if ctx.project else None)
    except (SuiteError, ArmError, RefError, ProjectError, OutputError) as e:
        raise input_error(e) from None
    if dry_run:
        try:
            print_plan(plans, residency, rounds=True, devices=devices, sim=sim_costs)
        except SimError as e:
            raise input_error(e) from None
        click.echo(terminal(f"suite: {suite.name} ({suite.path})"))
        block = len(devices) if len(devices) > 1 else 1
        click.echo(rounds_line(Schedule.plan(rounds, max_rounds, block=block).looks, extend_to))
        if line := client_line(suite):
            click.echo(line)
        if budget_minutes:
            click.echo(f"budget: {budget_minutes:g} min, counted from the harness's start")
        return

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    if sim_costs is not None:
        deterministic(null_arm)
        runner = SimulatedABRunner(suite, plans, sim_costs, say)
    else:
        suite, notes = unsampled_memory(suite, plans)
        suite = search_within(suite, budget_minutes, len(plans) * rounds)
        try:
            stamp_dir = fresh_dir(stamp_dir)  # this A/B's logs and runs, never another's
        except OutputError as e:
            raise input_error(e) from None
        runner = ABRunner(
            suite,
            plans,
            stamp_dir,
            rounds,
            max_rounds,
            ready_timeout,
            extend_to=extend_to,
            progress=lambda label: LiveProgress(console, label, disabled=quiet),
            start_together=together(plans, residency, devices),
            devices=devices,
            budget=Budget.from_start(budget_minutes) if budget_minutes else None,
            inconclusive=inconclusive or "pass",
            notes=notes,
            quiet_wait_s=quiet_wait_s or 0.0,
            say=say,
            on_look=lambda comparison, upcoming, walls: console.print(
                look_line(comparison.to_dict(), upcoming, walls, auto=bool(extend_to)),
                highlight=False,
                markup=False,
                soft_wrap=True,
            ),
        )
    command = harness_command()
    try:
        outcome = runner.run()
    except (SimError, ComparisonError) as e:  # the simulator's: a suite or model it cannot run
        raise input_error(e) from None
    except KeyboardInterrupt:
        if not finished(runner.rounds):
            interrupted(f"no run had finished (logs: {stamp_dir})")
        console.print("interrupted: every server was stopped")
        outcome = runner.outcome(problem="interrupted before the last round")
        result = ab_result(suite, plans, outcome, command)
        finish(ab_ending(result, out_dir, interrupted=True), summary_file)
    finish(ab_ending(ab_result(suite, plans, outcome, command), out_dir), summary_file)


def deterministic(null_arm: bool) -> None:
    """`ab --sim` takes no option that repeats a measurement: a simulation is deterministic."""
    given = click.get_current_context().get_parameter_source
    fixed = [o for o in ("rounds", "max_rounds") if given(o) == ParameterSource.COMMANDLINE]
    if null_arm or fixed:
        what = "--null-arm" if null_arm else f"--{fixed[0].replace('_', '-')}"
        raise InputError(f"{what} does not apply to --sim: a simulation is deterministic")


@click.command()
@click.argument("a", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
)
def compare(a, b, out_dir):
    """Compare saved runs offline: A's runs as base, B's as head (a report and an exit code)."""
    try:
        writable_dir(out_dir)
        result = compare_saved(a, b)
    except (ComparisonError, ValueError, OSError) as e:
        raise InputError(str(e)) from None
    finish(ab_ending(result, out_dir))


@click.command()
@click.argument("result_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write [default: beside RESULT_JSON].",
)
def report(result_json, out_dir):
    """Render the Markdown report (and plots) again from a saved A/B result JSON."""
    try:
        result = load_result(result_json)
        result["comparison"] = judged_again(
            result["comparison"]
        )  # one saved before metrics carried them
        out_dir = writable_dir(out_dir if out_dir is not None else result_json.parent)
    except (ComparisonError, ValueError, OSError) as e:
        raise InputError(str(e)) from None
    try:
        path = write_report(result, out_dir, rerender=True)
    except Exception as exc:  # noqa: BLE001 - the report is this verb's product: exit 2
        raise InputError(f"report not written: {type(exc).__name__}: {exc}") from None
    click.echo(f"report: {path}")
