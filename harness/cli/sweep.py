"""`harness sweep`: load curves of one arm or an A/B of two, the knee, goodput, a verdict per
level. Exit codes: 0 pass, 1 regression at some level, 2 invalid run, crash or bad input."""

from __future__ import annotations

import click
from rich.console import Console

from harness.cli.command_line import harness_command
from harness.cli.errors import input_error
from harness.cli.finish import Ending, finish
from harness.cli.options import (
    COSTS,
    Finite,
    api_key_option,
    budget_option,
    devices_option,
    dry_run_option,
    project_option,
    report_options,
    side_options,
)
from harness.cli.sweep_steps import Asked, judged, plan_sweep, print_sweep_plan, sweep_runner
from harness.report.summary import sweep_summary
from harness.sim.workload import SimError
from harness.sweep.knee import KNEE_GAIN
from harness.sweep.sweep import CAPACITY_TOLERANCE, COLD, SweepRuns
from harness.sweep.sweep_report import print_sweep, sweep_result, write_sweep_report


@click.command()
@click.option(
    "--suite",
    "suite_name",
    default="sweep",
    show_default=True,
    metavar="NAME_OR_PATH",
    help="Its first phase gives the request shape.",
)
@click.option(
    "--levels",
    default=None,
    metavar="1,2,4,...",
    help="Closed-loop client counts [default: 1,2,4,8,16].",
)
@click.option(
    "--rates",
    default=None,
    metavar="0.5,1,...",
    help="Poisson arrival rates in requests/s, instead of --levels.",
)
@click.option(
    "--requests",
    type=click.IntRange(1, 100_000),
    default=None,
    help="Requests per level [default: max(16, 4 x clients); rates: max(16, 8 s x rate)].",
)
@click.option(
    "--rounds",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    help="Each round starts every arm cold (ABBA order).",
)
@click.option(
    "--cold",
    type=click.Choice(COLD),
    default="round",
    show_default=True,
    help="round: one cold server per round runs every level in ascending order; "
    "level: one cold server per level.",
)
@click.option(
    "--slo",
    multiple=True,
    metavar="METRIC=LIMIT",
    help="e.g. ttft_p95_ms=2000 (repeatable): goodput is the highest level meeting all.",
)
@click.option(
    "--find-capacity",
    is_flag=True,
    help="After the levels, search the highest load meeting the suite's [slo] on the same "
    "server (its [capacity] table, else doubling from the first level); with two arms, gate "
    f"capacity_req_s (the suite's tolerance, else {CAPACITY_TOLERANCE:.0%}).",
)
@click.option(
    "--knee-gain",
    type=Finite(0, 10, "fraction in (0, 10]"),
    default=KNEE_GAIN,
    show_default=True,
    help="A step up gaining less than this fraction of tok/s per doubling is flat.",
)
@click.option(
    "--sim",
    "sim_costs",
    type=COSTS,
    default=None,
    help="Simulate instead of serving: each arm's own scheduler on a virtual clock priced by "
    "this cost model (a file, or HARDWARE:SHAPE[:WEIGHTS]); one deterministic round "
    "(docs/simulation.md).",
)
@click.option(
    "--ref", default=None, metavar="REF", help="One arm: this git ref's reference engine."
)
@click.option(
    "--serve-cmd",
    default=None,
    metavar="TEMPLATE",
    help="One arm: any OpenAI-compatible server, a command with {port}.",
)
@click.option("--url", default=None, metavar="URL", help="One arm: a server already running.")
@click.option("--pid", type=int, default=None, help="With --url: its pid, for memory.")
@click.option("--env", "env", default="", metavar="'K=V ...'", help="One arm: its environment.")
@click.option("--base", "base_ref", default=None, metavar="REF", help="Two arms: base's git ref.")
@click.option("--head", "head_ref", default=None, metavar="REF", help="Two arms: head's git ref.")
@side_options
@click.option("--model", default=None, help="Model for every arm [default: the suite's].")
@click.option("--flags", default=None, help="Server flags for every arm, replacing the suite's.")
@click.option(
    "--isolated", is_flag=True, help="Build each git ref as servegate.toml's [server.isolated]."
)
@api_key_option
@devices_option
@budget_option
@dry_run_option
@project_option
@report_options
def sweep(**options):
    """Load curves: run the suite's request shape at each level, find the knee and goodput;
    with two arms, gate every level like `harness ab` does.

    \b
    harness sweep --levels 1,2,4,8,16                       # the working tree
    harness sweep --rates 0.5,1,2,4 --slo ttft_p95_ms=2000
    harness sweep --head-flags "--parallel 2" --levels 1,2,4,8
    harness sweep --base main --head HEAD --rounds 5
    harness sweep --sim costs.json --head-flags "--parallel 8"   # simulated, in seconds
    harness sweep --base main --head HEAD --rates 1,2,4 --find-capacity
    harness sweep --base main --head HEAD --devices 0,1 --budget-minutes 40

    Knee: the lowest level after which every step up gains < --knee-gain tok/s per doubling while
    TTFT p95 rises at every step. Goodput: the highest level that, with every level below
    it, meets every --slo. Writes results/DATE-sweep-SUITE-....md (+ .json, plots).
    Exit 0 pass (or one valid arm), 1 head regresses at some level (the report names the
    first), 2 invalid run, crash or bad input. docs/sweep.md has the details.

    A sweep runs one server at a time: with --devices it is placed on one of them, and with
    several the arms rotate over them every round. With --budget-minutes no round starts that
    would not end inside the budget (as long as the longest so far); the report says how many
    rounds it held.
    """
    asked = Asked.of(options)
    plan = plan_sweep(asked)
    if asked.dry_run:
        return print_sweep_plan(plan, asked)
    console = Console(stderr=True)
    runner = sweep_runner(plan, asked, console)
    stopped = False
    try:
        raw = runner.run()
    except SimError as e:
        raise input_error(e) from None
    except KeyboardInterrupt:
        raw, stopped = SweepRuns(runner.runs), True
    by_level, verdict = judged(plan, asked, raw, stopped, runner.log_dir)
    if stopped:
        console.print("interrupted: every server was stopped")
    result = sweep_result(plan.sweep, plan.plans, plan.rounds, raw, by_level, verdict,
                          harness_command())  # fmt: skip
    ending = Ending(
        verdict.verdict,
        verdict.exit_code,
        show=lambda: print_sweep(Console(width=120), result),
        write_report=lambda: write_sweep_report(result, asked.out_dir),
        summary=lambda report: sweep_summary(result, report),
        interrupted=stopped,
    )
    finish(ending, asked.summary_file)
