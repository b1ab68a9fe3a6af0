"""harness sim: the reference engine's scheduler on a virtual clock (docs/simulation.md)."""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import click
from rich.console import Console

from harness.arms.arms import Arm, ArmError
from harness.arms.launcher import LaunchError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.cli.ab import EXIT_INVALID, InputError, input_error
from harness.cli.options import arm_context
from harness.cli.outputs import OutputError, writable_file
from harness.files import write_atomic
from harness.report.display import LiveProgress, print_run
from harness.runs.machine import machine_facts
from harness.runs.plan import Side, default_refs, plan_arm
from harness.runs.run import run_arm
from harness.sim.run import sim_run
from harness.sim.workload import SimError
from harness.workload.suite import SuiteError, load_suite

CALIBRATION = ("single-client", "short-concurrency", "long-transient", "sim-calibration")
VALIDATION = (
    "smoke", "single-client", "short-concurrency", "boundary-spill", "prefill-storm",
    "long-transient", "rival-chat", "head-of-line", "trace-replay",
)  # fmt: skip
COMPARED = ("ttft_p50_ms", "ttft_p95_ms", "tok_s")
COSTS = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
def sim() -> None:
    """Run suites through the reference engine's own scheduler on a virtual clock.

    \b
    harness sim calibrate --out costs.json      fit a cost model to this machine's steps
    harness sim run --suite smoke --costs costs.json --flags "--parallel 2"
    harness sim validate --costs costs.json     simulated against real, per suite
    """


def _arm(suite_name: str, ref: str | None, flags: str | None, model: str | None = None):
    suite = load_suite(suite_name)
    sides = default_refs({"arm": Side(ref, "", "", None, None, None)})
    ctx = arm_context(sides, suite, model, flags, False, "", True)
    return suite, plan_arm("arm", sides["arm"], ctx)


def _guard(fn):
    try:
        return fn()
    except (SuiteError, SimError, ArmError, RefError, ProjectError, OutputError) as exc:
        raise input_error(exc) from None


@sim.command("run")
@click.option("--suite", "suite_name", required=True, metavar="NAME_OR_PATH")
@click.option("--costs", required=True, type=COSTS, help="A cost model (harness sim calibrate).")
@click.option("--flags", default=None, help="Server flags, replacing the suite's.")
@click.option(
    "--model", default=None, help="Model whose shape and tokenizer [default: the suite's]."
)
@click.option("--ref", default=None, metavar="REF", help="Simulate this ref's scheduler code.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run JSON to write [default: results/runs/<time>-<suite>-sim.json].",
)
def run_command(suite_name, costs, flags, model, ref, out) -> None:
    """Simulate one run of a suite; write the run JSON `harness run` writes (marked simulated)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    suite, plan = _guard(lambda: _arm(suite_name, ref, flags, model))
    out = _guard(
        lambda: writable_file(out or Path("results/runs") / f"{stamp}-{suite.name}-sim.json")
    )
    result = _guard(lambda: sim_run(suite, plan.arm, costs))
    try:
        write_atomic(out, json.dumps({"arm": plan.desc, "runs": [result]}, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"run JSON not written: {out}: {exc.strerror or exc}") from None
    print_run(Console(), [result])
    s = result["simulated"]
    click.echo(f"simulated with {s['name']} ({s['source']}) in {s['wall_s']:.2f} s")
    click.echo(f"run JSON: {out}")
    if not result["valid"]:
        sys.exit(EXIT_INVALID)


def _real(suite_name: str, ref: str | None, trace: Path | None, quiet: bool) -> dict:
    suite, plan = _guard(lambda: _arm(suite_name, ref, None))
    arm: Arm = plan.arm
    if trace is not None:
        arm = replace(arm, flags=f"{arm.flags} --step-trace {shlex.quote(str(trace))}".strip())
    log = Path(tempfile.mkdtemp(prefix="servegate-sim-")) / f"{suite.name}.log"
    with LiveProgress(Console(stderr=True), f"{suite.name} (real) ", disabled=quiet) as progress:
        try:
            return run_arm(suite, arm, log, progress)
        except LaunchError as exc:
            raise InputError(f"{suite.name}: {exc}") from None


def _table(names: list[str], costs: Path, ref: str | None, quiet: bool, reals=None) -> list[dict]:
    rows = []
    for i, name in enumerate(names):
        real = reals[i] if reals else _real(name, ref, None, quiet)
        suite, plan = _guard(lambda n=name: _arm(n, ref, None))
        simulated = _guard(lambda s=suite, p=plan: sim_run(s, p.arm, costs))
        for metric in COMPARED:
            r, s = real["summary"].get(metric), simulated["summary"].get(metric)
            err = None if not r or s is None else (s - r) / r
            rows.append({"suite": name, "metric": metric, "real": r, "sim": s, "error": err})
    return rows


def _print_table(rows: list[dict]) -> None:
    click.echo("| suite | metric | real | simulated | error |")
    click.echo("|---|---|---|---|---|")
    for r in rows:
        err = "n/a" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        real, simulated = (_num(r[k]) for k in ("real", "sim"))
        click.echo(f"| {r['suite']} | {r['metric']} | {real} | {simulated} | {err} |")


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


@sim.command("calibrate")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--suite",
    "suites",
    multiple=True,
    metavar="NAME_OR_PATH",
    help=f"Suites run for real to measure steps [default: {', '.join(CALIBRATION)}].",
)
@click.option("--ref", default=None, metavar="REF", help="Measure this ref's engine.")
@click.option("--quiet", is_flag=True)
def calibrate(out, suites, ref, quiet) -> None:
    """Run suites on the real engine with its step trace on, fit a cost model to the steps,
    write it, and print the simulated runs of the same suites against the real ones."""
    out = _guard(lambda: writable_file(out))
    names = list(suites or CALIBRATION)
    trace = Path(tempfile.mkdtemp(prefix="servegate-steps-")) / "steps.jsonl"
    reals = [_real(n, ref, trace, quiet) for n in names]
    suite, plan = _guard(lambda: _arm(names[0], ref, None))
    cpu = machine_facts().get("cpu_model") or platform.processor() or "this CPU"
    source = f"{plan.arm.model} on {cpu}, {len(names)} suites, {date.today().isoformat()}"
    argv = [plan.arm.python or sys.executable, "-m", "engine.sim", "fit", str(trace),
            "--out", str(out.resolve()), "--name", out.stem, "--source", source,
            "--model", plan.arm.model]  # fmt: skip
    done = subprocess.run(argv, cwd=plan.arm.cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise InputError(f"the fit failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    click.echo(f"cost model: {out} (fit error per family: {done.stdout.strip()})")
    _print_table(_table(names, out, ref, quiet, reals))


@sim.command("validate")
@click.option("--costs", required=True, type=COSTS)
@click.option("--suite", "suites", multiple=True, metavar="NAME_OR_PATH",
              help=f"Suites to run both ways [default: {', '.join(VALIDATION)}].")  # fmt: skip
@click.option("--ref", default=None, metavar="REF")
@click.option("--quiet", is_flag=True)
def validate(costs, suites, ref, quiet) -> None:
    """Run suites for real and simulated; print each one's error per metric."""
    _print_table(_table(list(suites or VALIDATION), costs, ref, quiet))
