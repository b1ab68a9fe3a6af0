"""What a dry run prints: one line per arm, how a round's servers run, the rounds and looks,
the client processes (scripts may read these lines)."""

from __future__ import annotations

import shlex

import click

from harness.arms.project import device_list
from harness.escape import terminal
from harness.load.workers import procs_for
from harness.runs.plan import ArmPlan, together
from harness.sim.simulated_run import sim_argv
from harness.workload.suite import AUTO, Suite


def rounds_line(looks: tuple[int, ...], extend_to: int | None) -> str:
    """`rounds: 3, up to 9 (looks at 3, 5, 7, 9)`, and how far `auto` may move the last."""
    more = f", then up to {extend_to} as the noise measured needs" if extend_to else ""
    return f"rounds: {looks[0]}, up to {looks[-1]} (looks at {', '.join(map(str, looks))}){more}"


def client_line(suite: Suite) -> str | None:
    """`client processes: N` when more than one fires the requests, or how `auto` picks."""
    if suite.client_procs == AUTO:
        n = procs_for(suite)
        return f"client processes: auto, {n} here" if n > 1 else None
    return f"client processes: {suite.client_procs}" if suite.client_procs > 1 else None


def print_plan(
    plans: dict[str, ArmPlan],
    residency: str | None = None,
    rounds: bool = False,
    devices: tuple[str, ...] = (),
    sim: str | None = None,
) -> None:
    """One line per arm, then for rounds of several servers (ab) how many are up at once: what
    --dry-run promises (scripts may read it). With `sim` (a cost model), what --sim would run
    for each arm instead of its server (raises SimError for an arm it cannot simulate)."""
    for name, plan in plans.items():
        d = plan.desc
        where = f" commit {d.commit}" if d.commit else ""
        what = f"serve: {d.cmd}" if d.cmd else f"running at {plan.arm.url}"
        if sim is not None:
            argv = sim_argv(plan.arm, sim, "WORKLOAD.json")
            what = f"simulate: {shlex.join(argv)} in {plan.arm.cwd}"
        flags = " ".join(d.flags or []) or "(none)"
        env = " ".join(f"{k}={v}" for k, v in (d.env or {}).items())
        line = f"{name}: {d.label}{where} | {what} | flags: {flags}" + (
            f" | env: {env}" * bool(env)
        )
        click.echo(terminal(line))
    if sim is not None:
        click.echo("simulated: one deterministic run per arm on a virtual clock (WORKLOAD.json: "
                   "the suite's requests, written when it runs); no server is started")  # fmt: skip
    elif rounds:
        click.echo(f"servers: {servers_line(plans, residency, devices)}")


def servers_line(plans: dict[str, ArmPlan], residency: str | None, devices: tuple) -> str:
    """How a round's servers run: `one-at-a-time`, `together`, or at once on devices."""
    if len(devices) > 1:
        each = "group" if "," in devices[0] else "device"
        return f"at once, one per {each} ({device_list(devices)}), swapping every round"
    how = "together" if together(plans, residency, devices) else "one-at-a-time"
    return how + (f" on device {devices[0]}" if devices else "")
