"""`harness ab`, `harness compare` and `harness report`: the gate's command line.
Exit codes: 0 pass, 1 regression, 2 invalid run, infrastructure failure or server crash."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console

from harness.cli.ab_steps import Asked, plan_ab, print_ab_plan, runner_for
from harness.cli.command_line import harness_command
from harness.cli.errors import InputError, input_error
from harness.cli.finish import Ending, finish, interrupted
from harness.cli.options import (
    COSTS,
    SUITE_HELP,
    api_key_option,
    budget_option,
    devices_option,
    dry_run_option,
    inconclusive_option,
    project_option,
    quiet_wait_option,
    report_options,
    residency_option,
    rounds_options,
    side_options,
    workload_options,
)
from harness.cli.outputs import (
    writable_dir,
)
from harness.report.ab_report import write_report
from harness.report.summary import ab_summary
from harness.report.terminal import print_verdict
from harness.results.ab_result import ABResult
from harness.results.errors import ComparisonError
from harness.results.saved import load_result
from harness.runs.ab import finished
from harness.runs.offline import compare_saved
from harness.sim.workload import SimError
from harness.stats.compare import judged_again


def ab_ending(result: ABResult, out_dir: Path, interrupted: bool = False) -> Ending:
    """How an A/B (or an offline compare) ends: the verdict as the gate gave it, then the
    views of its result."""
    return Ending(
        result.comparison.verdict,
        result.comparison.exit_code,
        show=lambda: print_verdict(Console(width=120), result),
        write_report=lambda: write_report(result, out_dir),
        summary=lambda report: ab_summary(result, report),
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
def ab(**options):
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
    asked = Asked.of(options)
    plan = plan_ab(asked)
    if asked.dry_run:
        return print_ab_plan(plan, asked)
    console = Console(stderr=True)
    runner, logs = runner_for(plan, asked, console, harness_command())
    try:
        result = runner.run()
    except (SimError, ComparisonError) as e:  # the simulator's: a suite or model it cannot run
        raise input_error(e) from None
    except KeyboardInterrupt:
        if not finished(runner.rounds):
            interrupted(f"no run had finished (logs: {logs})")
        console.print("interrupted: every server was stopped")
        result = runner.outcome(problem="interrupted before the last round")
        finish(ab_ending(result, asked.out_dir, interrupted=True), asked.summary_file)
    finish(ab_ending(result, asked.out_dir), asked.summary_file)


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
        result = ABResult.from_json(load_result(result_json))
        result = replace(result, comparison=judged_again(result.comparison))  # an older one's
        out_dir = writable_dir(out_dir if out_dir is not None else result_json.parent)
    except (ComparisonError, ValueError, OSError) as e:
        raise InputError(str(e)) from None
    try:
        path = write_report(result, out_dir, rerender=True)
    except Exception as exc:  # noqa: BLE001 - the report is this verb's product: exit 2
        raise InputError(f"report not written: {type(exc).__name__}: {exc}") from None
    click.echo(f"report: {path}")
