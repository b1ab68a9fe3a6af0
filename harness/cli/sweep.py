"""`harness sweep`: load curves of one arm or an A/B of two, the knee, goodput, a verdict per
level. Exit codes: 0 pass, 1 regression at some level, 2 invalid run, crash or bad input."""

from __future__ import annotations

import click
from click.core import ParameterSource
from rich.console import Console

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.cli.command_line import harness_command
from harness.cli.errors import InputError, input_error
from harness.cli.finish import Ending, finish, interrupted
from harness.cli.options import (
    COSTS,
    Finite,
    api_key_option,
    arm_context,
    budget_option,
    devices_option,
    dry_run_option,
    project_option,
    report_options,
    side_options,
    sides_from,
)
from harness.cli.outputs import OutputError, checked_summary, fresh_dir
from harness.cli.plan_lines import print_plan
from harness.report.display import LiveProgress
from harness.report.summary import sweep_summary
from harness.results.errors import ComparisonError
from harness.results.metrics import SUMMARY_KEYS
from harness.runs.budget import Budget
from harness.runs.plan import (
    Side,
    default_refs,
    label_arms,
    placed_devices,
    plan_arm,
    unsampled_memory,
)
from harness.sim.workload import SimError
from harness.sweep.judgement import judge
from harness.sweep.knee import KNEE_GAIN, SloError, parse_slos
from harness.sweep.sweep import (
    CAPACITY_TOLERANCE,
    COLD,
    Sweep,
    SweepError,
    SweepRunner,
    capacity_rounds,
    describe,
    parse_levels,
    rounds_by_level,
    search_plan,
)
from harness.sweep.sweep_report import print_sweep, sweep_result, write_sweep_report
from harness.workload.suite import SuiteError, load_suite


def _sides(one: Side, base_ref, head_ref, opts) -> dict[str, Side]:
    """One arm (`--ref`/`--serve-cmd`/`--url`) unless any --base*/--head* option names two."""
    two = base_ref or head_ref or any(v not in (None, "") for v in opts.values())
    if two and (one.ref or one.cmd or one.url or one.env):
        raise InputError(
            "give --ref/--serve-cmd/--url/--env for one arm, or --base/--head options for two"
        )
    return default_refs(sides_from(opts, base_ref, head_ref) if two else {"arm": one})


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
def sweep(
    suite_name,
    levels,
    rates,
    requests,
    rounds,
    cold,
    slo,
    find_capacity,
    knee_gain,
    sim_costs,
    ref,
    serve_cmd,
    url,
    pid,
    env,
    base_ref,
    head_ref,
    model,
    flags,
    isolated,
    api_key,
    devices,
    budget_minutes,
    dry_run,
    project_file,
    out_dir,
    ready_timeout,
    quiet,
    summary_file,
    **side_opts,
):
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
    console = Console(stderr=True)
    if levels is not None and rates is not None:
        raise InputError("give --levels or --rates, not both")
    mode = "rate" if rates is not None else "concurrency"
    if sim_costs is not None:
        given = click.get_current_context().get_parameter_source("rounds")
        if given == ParameterSource.COMMANDLINE:
            raise InputError("--rounds does not apply to --sim: a simulation is deterministic")
        rounds = 1
    try:
        given = rates if rates is not None else levels
        values = parse_levels("1,2,4,8,16" if given is None else given, mode)
        slos = parse_slos(slo, set(SUMMARY_KEYS))  # each with its direction
        one = Side(ref, "", env, serve_cmd, url, pid)
        sides = _sides(one, base_ref, head_ref, side_opts)
        suite = load_suite(suite_name)
        if summary_file:
            checked_summary(summary_file)
        ctx = arm_context(sides, suite, model, flags, isolated, api_key, not dry_run, project_file)
        plans = {n: plan_arm(n, s, ctx) for n, s in sides.items()}
        if len(plans) == 2:
            label_arms(plans, sides)
        suite = unsampled_memory(suite, plans)[0]
        devices = placed_devices(devices, ctx.project, plans, at_once=False)
        budget_minutes = budget_minutes or (ctx.project.budget_minutes if ctx.project else None)
        capacity = search_plan(suite, mode, values[0]) if find_capacity else None
        if capacity is not None and sim_costs is not None:
            raise SweepError("--find-capacity needs served runs, not --sim")
    except (SuiteError, ArmError, RefError, ProjectError, SweepError, SloError, OutputError) as e:
        raise input_error(e) from None
    if dry_run:
        try:
            print_plan(plans, sim=sim_costs)  # a sweep measures one server at a time
        except SimError as e:
            raise input_error(e) from None
        click.echo(f"levels: {', '.join(str(v) for v in values)} ({mode})")
        if capacity is not None:
            click.echo(f"then a capacity search: {describe(capacity)}")
        return
    plan = Sweep(suite, mode, values, requests, cold, capacity)
    logs = out_dir / "logs" / f"sweep-{suite.name}"
    try:
        logs = logs if sim_costs is not None else fresh_dir(logs)  # this sweep's own
    except OutputError as e:
        raise input_error(e) from None
    runner = SweepRunner(
        plan,
        plans,
        logs,
        rounds,
        ready_timeout,
        progress=lambda label: LiveProgress(console, label, disabled=quiet),
        sim=sim_costs,
        devices=devices,
        budget=Budget.from_start(budget_minutes) if budget_minutes else None,
    )
    stopped = False
    try:
        raw = runner.run()
    except SimError as e:
        raise input_error(e) from None
    except KeyboardInterrupt:
        raw, stopped = {"runs": runner.runs, "crash": None, "budget_ended": ""}, True
    try:
        by_level = rounds_by_level(raw["runs"], plan.names(), list(plans))
        gate = {k: v for k, v in suite.gate.items() if k != "capacity_req_s"}
        verdict = judge(
            by_level,
            values,
            list(plans),
            gate,
            suite.memory_slack_bytes,
            slos,
            raw["crash"],
            knee_gain,
            capacity_rounds(raw["runs"], list(plans)) if capacity else None,
            suite.gate.get("capacity_req_s", CAPACITY_TOLERANCE),
        )
    except ComparisonError as e:
        if stopped:  # nothing comparable ran; each finished run is kept beside its log
            interrupted(f"the runs so far: {runner.log_dir}")
        raise InputError(str(e)) from None
    if stopped:
        console.print("interrupted: every server was stopped")
        verdict |= {"verdict": "INVALID", "exit_code": 2}
        verdict["invalid"] = ["interrupted before the last round", *verdict.get("invalid", [])]
    result = sweep_result(plan, plans, rounds, raw, by_level, verdict, harness_command())
    ending = Ending(
        verdict["verdict"],
        verdict["exit_code"],
        show=lambda: print_sweep(Console(width=120), result),
        write_report=lambda: write_sweep_report(result, out_dir),
        summary=lambda report: sweep_summary(result, report),
        interrupted=stopped,
    )
    finish(ending, summary_file)
