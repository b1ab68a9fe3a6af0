"""`harness ab` in steps: what was asked (`Asked`, the options as parsed), the plan made from it
(`plan_ab`: the suite and each arm's plan, checked before anything starts), the plan said
(`--dry-run`), and the runner that measures it (a real or a simulated A/B)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from click.core import ParameterSource
from rich.console import Console

from harness.arms.arms import ArmError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.cli.context import WithSides, arm_context, sides_from, suite_here
from harness.cli.errors import InputError, input_error
from harness.cli.options import check_rounds
from harness.cli.outputs import OutputError, checked_summary, fresh_dir, writable_dir
from harness.cli.plan_lines import client_line, print_plan, rounds_line
from harness.escape import terminal
from harness.report.display import LiveProgress
from harness.report.headline import look_line
from harness.runs.ab import ABRunner
from harness.runs.budget import Budget, search_within
from harness.runs.plan import (
    ArmPlan,
    default_refs,
    label_arms,
    placed_devices,
    plan_arm,
    together,
    unsampled_memory,
)
from harness.sim.simulated_ab import SimulatedABRunner
from harness.sim.workload import SimError
from harness.stats.sequential import Schedule
from harness.workload.suite import Suite, SuiteError, load_suite, override


@dataclass(frozen=True)
class Asked(WithSides):
    """`harness ab`'s options as click parsed them; `sides` holds the per-arm ones."""

    base_ref: str | None
    head_ref: str | None
    suite_name: str | None
    model: str | None
    flags: str | None
    rounds: int
    max_rounds: int | str
    null_arm: bool
    sim_costs: str | None  # a cost model: a file, or HARDWARE:SHAPE[:WEIGHTS]
    isolated: bool
    api_key: str | None
    dry_run: bool
    project_file: Path | None
    residency: str | None
    devices: str | None
    budget_minutes: float | None
    inconclusive: str | None
    quiet_wait_s: float | None
    out_dir: Path
    ready_timeout: float | None
    quiet: bool
    summary_file: Path | None
    clients: int | None
    requests: int | None
    prompt_tokens: int | None
    max_tokens: int | None
    rate: float | None
    client_procs: str | None
    sides: dict


@dataclass(frozen=True)
class ABPlan:
    suite: Suite
    plans: dict[str, ArmPlan]
    devices: tuple[str, ...]
    max_rounds: int
    extend_to: int | None
    budget_minutes: float | None
    inconclusive: str
    stamp_dir: Path  # this A/B's logs and runs


def plan_ab(asked: Asked) -> ABPlan:
    """Everything `ab` checks before it starts a server; one `Error:` line (exit 2) if not."""
    max_rounds, extend_to = check_rounds(asked.rounds, asked.max_rounds)
    try:
        sides = default_refs(sides_from(asked.sides, asked.base_ref, asked.head_ref))
        suite = override(load_suite(suite_here(asked.suite_name, asked.project_file)),
                         clients=asked.clients, requests=asked.requests,
                         prompt_tokens=asked.prompt_tokens, max_tokens=asked.max_tokens,
                         rate=asked.rate, client_procs=asked.client_procs)  # fmt: skip
        stamp_dir = asked.out_dir / "logs" / suite.name
        if not asked.dry_run:  # a dry run writes nothing, not even a probe
            writable_dir(asked.out_dir)
            writable_dir(stamp_dir)
        if asked.summary_file:
            checked_summary(asked.summary_file)
        ctx = arm_context(sides, suite, asked.model, asked.flags, asked.isolated, asked.api_key,
                          not asked.dry_run, asked.project_file)  # fmt: skip
        plans = {n: plan_arm(n, s, ctx) for n, s in sides.items()}
        if asked.null_arm:
            plans["null"] = plan_arm("null", sides["base"], ctx)
        label_arms(plans, sides)
        project = ctx.project
        return ABPlan(
            suite=suite,
            plans=plans,
            devices=placed_devices(asked.devices, project, plans),
            max_rounds=max_rounds,
            extend_to=extend_to,
            budget_minutes=asked.budget_minutes or (project.budget_minutes if project else None),
            inconclusive=asked.inconclusive
            or (project.inconclusive if project else None)
            or "pass",
            stamp_dir=stamp_dir,
        )
    except (SuiteError, ArmError, RefError, ProjectError, OutputError) as e:
        raise input_error(e) from None


def print_ab_plan(plan: ABPlan, asked: Asked) -> None:
    """`--dry-run`: each arm's command, the suite, the looks, the clients and the budget."""
    try:
        print_plan(plan.plans, asked.residency, rounds=True, devices=plan.devices,
                   sim=asked.sim_costs)  # fmt: skip
    except SimError as e:
        raise input_error(e) from None
    click.echo(terminal(f"suite: {plan.suite.name} ({plan.suite.path})"))
    block = len(plan.devices) if len(plan.devices) > 1 else 1
    looks = Schedule.plan(asked.rounds, plan.max_rounds, block=block).looks
    click.echo(rounds_line(looks, plan.extend_to))
    if line := client_line(plan.suite):
        click.echo(line)
    if plan.budget_minutes:
        click.echo(f"budget: {plan.budget_minutes:g} min, counted from the harness's start")


def runner_for(
    plan: ABPlan, asked: Asked, console: Console, command: str
) -> tuple[ABRunner | SimulatedABRunner, Path]:
    """The A/B that measures the plan (simulated with `--sim`, else cold servers per round),
    and the folder of its logs; `command` is the command line its result keeps."""

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    if asked.sim_costs is not None:
        deterministic(asked.null_arm)
        simulated = SimulatedABRunner(plan.suite, plan.plans, asked.sim_costs, say, command)
        return simulated, plan.stamp_dir
    suite, notes = unsampled_memory(plan.suite, plan.plans)
    suite = search_within(suite, plan.budget_minutes, len(plan.plans) * asked.rounds)
    try:
        stamp_dir = fresh_dir(plan.stamp_dir)  # this A/B's logs and runs, never another's
    except OutputError as e:
        raise input_error(e) from None
    runner = ABRunner(
        suite,
        plan.plans,
        stamp_dir,
        asked.rounds,
        plan.max_rounds,
        asked.ready_timeout,
        extend_to=plan.extend_to,
        progress=lambda label: LiveProgress(console, label, disabled=asked.quiet),
        start_together=together(plan.plans, asked.residency, plan.devices),
        devices=plan.devices,
        budget=Budget.from_start(plan.budget_minutes) if plan.budget_minutes else None,
        inconclusive=plan.inconclusive,
        notes=notes,
        quiet_wait_s=asked.quiet_wait_s or 0.0,
        say=say,
        command=command,
        on_look=lambda comparison, upcoming, walls: say(
            look_line(comparison, upcoming, walls, auto=bool(plan.extend_to))
        ),
    )
    return runner, stamp_dir


def deterministic(null_arm: bool) -> None:
    """`ab --sim` takes no option that repeats a measurement: a simulation is deterministic."""
    given = click.get_current_context().get_parameter_source
    fixed = [o for o in ("rounds", "max_rounds") if given(o) == ParameterSource.COMMANDLINE]
    if null_arm or fixed:
        what = "--null-arm" if null_arm else f"--{fixed[0].replace('_', '-')}"
        raise InputError(f"{what} does not apply to --sim: a simulation is deterministic")
