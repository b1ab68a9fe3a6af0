"""`harness sweep` in steps: what was asked (`Asked`), the plan made from it (`plan_sweep`:
levels, SLOs, each arm's plan, checked before anything starts), the plan said (`--dry-run`),
the runner that measures it, and the judgement of what it measured."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.cli.context import WithSides, arm_context, sides_from
from harness.cli.errors import InputError, input_error
from harness.cli.finish import interrupted
from harness.cli.outputs import OutputError, checked_summary, fresh_dir
from harness.cli.plan_lines import print_plan
from harness.report.display import LiveProgress
from harness.results.errors import ComparisonError
from harness.results.metrics import SUMMARY_KEYS
from harness.results.sweep_result import Judgement, LevelRound
from harness.runs.budget import Budget
from harness.runs.plan import (
    ArmPlan,
    Side,
    default_refs,
    label_arms,
    placed_devices,
    plan_arm,
    unsampled_memory,
)
from harness.sim.workload import SimError
from harness.sweep.judgement import judge
from harness.sweep.knee import Slo, SloError, parse_slos
from harness.sweep.sweep import (
    CAPACITY_TOLERANCE,
    Sweep,
    SweepError,
    SweepRunner,
    SweepRuns,
    capacity_rounds,
    describe,
    parse_levels,
    rounds_by_level,
    search_plan,
)
from harness.workload.suite import SuiteError, load_suite


@dataclass(frozen=True)
class Asked(WithSides):
    """`harness sweep`'s options as click parsed them; `sides` holds the per-arm ones."""

    suite_name: str  # click gives its default
    levels: str | None
    rates: str | None
    requests: int | None
    rounds: int
    cold: str
    slo: tuple[str, ...]
    find_capacity: bool
    knee_gain: float
    sim_costs: str | None
    ref: str | None
    serve_cmd: str | None
    url: str | None
    pid: int | None
    env: str
    base_ref: str | None
    head_ref: str | None
    model: str | None
    flags: str | None
    isolated: bool
    api_key: str | None
    devices: str | None
    budget_minutes: float | None
    dry_run: bool
    project_file: Path | None
    out_dir: Path
    ready_timeout: float | None
    quiet: bool
    summary_file: Path | None
    sides: dict


@dataclass(frozen=True)
class SweepPlan:
    sweep: Sweep
    plans: dict[str, ArmPlan]
    slos: list[Slo]
    rounds: int  # one when simulated: a simulation is deterministic
    devices: tuple[str, ...]
    budget_minutes: float | None


def _sides(one: Side, base_ref, head_ref, opts) -> dict[str, Side]:
    """One arm (`--ref`/`--serve-cmd`/`--url`) unless any --base*/--head* option names two."""
    two = base_ref or head_ref or any(v not in (None, "") for v in opts.values())
    if two and (one.ref or one.cmd or one.url or one.env):
        raise InputError(
            "give --ref/--serve-cmd/--url/--env for one arm, or --base/--head options for two"
        )
    return default_refs(sides_from(opts, base_ref, head_ref) if two else {"arm": one})


def plan_sweep(a: Asked) -> SweepPlan:
    """Everything `sweep` checks before it starts a server; one `Error:` line (exit 2) if not."""
    if a.levels is not None and a.rates is not None:
        raise InputError("give --levels or --rates, not both")
    mode = "rate" if a.rates is not None else "concurrency"
    rounds = a.rounds
    if a.sim_costs is not None:
        given = click.get_current_context().get_parameter_source("rounds")
        if given == ParameterSource.COMMANDLINE:
            raise InputError("--rounds does not apply to --sim: a simulation is deterministic")
        rounds = 1
    try:
        given_levels = a.rates if a.rates is not None else a.levels
        values = parse_levels("1,2,4,8,16" if given_levels is None else given_levels, mode)
        slos = parse_slos(a.slo, set(SUMMARY_KEYS))  # each with its direction
        one = Side(ref=a.ref, env=a.env, cmd=a.serve_cmd, url=a.url, pid=a.pid)
        sides = _sides(one, a.base_ref, a.head_ref, a.sides)
        suite = load_suite(a.suite_name)
        if a.summary_file:
            checked_summary(a.summary_file)
        ctx = arm_context(sides, suite, a.model, a.flags, a.isolated, a.api_key, not a.dry_run,
                          a.project_file)  # fmt: skip
        plans = {n: plan_arm(n, s, ctx) for n, s in sides.items()}
        if len(plans) == 2:
            label_arms(plans, sides)
        suite = unsampled_memory(suite, plans)[0]
        capacity = search_plan(suite, mode, values[0]) if a.find_capacity else None
        if capacity is not None and a.sim_costs is not None:
            raise SweepError("--find-capacity needs served runs, not --sim")
        project = ctx.project
        return SweepPlan(
            sweep=Sweep(suite, mode, values, a.requests, a.cold, capacity),
            plans=plans,
            slos=slos,
            rounds=rounds,
            devices=placed_devices(a.devices, project, plans, at_once=False),
            budget_minutes=a.budget_minutes or (project.budget_minutes if project else None),
        )
    except (SuiteError, ArmError, RefError, ProjectError, SweepError, SloError, OutputError) as e:
        raise input_error(e) from None


def print_sweep_plan(plan: SweepPlan, a: Asked) -> None:
    """`--dry-run`: each arm's command, the levels and the capacity search."""
    try:
        print_plan(plan.plans, sim=a.sim_costs)  # a sweep measures one server at a time
    except SimError as e:
        raise input_error(e) from None
    sweep = plan.sweep
    click.echo(f"levels: {', '.join(str(v) for v in sweep.levels)} ({sweep.mode})")
    if sweep.capacity is not None:
        click.echo(f"then a capacity search: {describe(sweep.capacity)}")


def sweep_runner(plan: SweepPlan, a: Asked, console: Console) -> SweepRunner:
    logs = a.out_dir / "logs" / f"sweep-{plan.sweep.suite.name}"
    try:
        logs = logs if a.sim_costs is not None else fresh_dir(logs)  # this sweep's own
    except OutputError as e:
        raise input_error(e) from None
    return SweepRunner(
        plan.sweep,
        plan.plans,
        logs,
        plan.rounds,
        a.ready_timeout,
        progress=lambda label: LiveProgress(console, label, disabled=a.quiet),
        sim=a.sim_costs,
        devices=plan.devices,
        budget=Budget.from_start(plan.budget_minutes) if plan.budget_minutes else None,
    )


def judged(
    plan: SweepPlan, a: Asked, raw: SweepRuns, stopped: bool, logs: Path
) -> tuple[dict[str, list[LevelRound]], Judgement]:
    """(the runs by level, the judgement) of what the sweep measured; an interrupted sweep is
    INVALID, and one with nothing comparable ends as an interrupt with its runs kept."""
    sweep, arms = plan.sweep, list(plan.plans)
    suite = sweep.suite
    try:
        by_level = rounds_by_level(raw.runs, sweep.names())
        verdict = judge(
            by_level,
            sweep.levels,
            arms,
            {k: v for k, v in suite.gate.items() if k != "capacity_req_s"},
            suite.memory_slack_bytes,
            plan.slos,
            raw.crash,
            a.knee_gain,
            capacity_rounds(raw.runs) if sweep.capacity else None,
            suite.gate.get("capacity_req_s", CAPACITY_TOLERANCE),
        )
    except ComparisonError as e:
        if stopped:  # nothing comparable ran; each finished run is kept beside its log
            interrupted(f"the runs so far: {logs}")
        raise InputError(str(e)) from None
    if stopped:
        why = ["interrupted before the last round", *verdict.invalid]
        verdict = replace(verdict, verdict="INVALID", exit_code=2, invalid=why)
    return by_level, verdict
