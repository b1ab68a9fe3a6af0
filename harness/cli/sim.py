"""harness sim: the reference engine's scheduler on a virtual clock (docs/simulation.md)."""

from __future__ import annotations

import platform
import shlex
import shutil
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
from harness.cli.command_line import harness_command
from harness.cli.context import arm_context
from harness.cli.errors import EXIT_INVALID, InputError, input_error
from harness.cli.options import COSTS
from harness.cli.outputs import OutputError, writable_file
from harness.files import strict_json, write_atomic
from harness.report.ab_report import to_plain
from harness.report.display import LiveProgress
from harness.report.terminal import print_run
from harness.results.run import Run, Simulation
from harness.runs.machine import machine_facts
from harness.runs.measure import run_arm
from harness.runs.plan import Side, default_refs, plan_arm
from harness.sim.simulated_run import sim_run
from harness.sim.validate import as_json, decisions, markdown, rows
from harness.sim.workload import SimError
from harness.sweep.sweep import Sweep, SweepError, parse_levels
from harness.workload.suite import Suite, SuiteError, load_suite

CALIBRATION = ("single-client", "short-concurrency", "long-transient", "sim-calibration")
VALIDATION = (  # the shipped suites on SmolLM2 that finish in about a minute (not smoke: tiny)
    "single-client", "short-concurrency", "boundary-spill", "prefill-storm", "long-transient",
    "rival-chat", "head-of-line", "trace-replay", "chat-shared-prefix", "serving-defaults",
)  # fmt: skip


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
@click.option(
    "--costs",
    required=True,
    type=COSTS,
    help="A cost model: a file (harness sim calibrate) or HARDWARE:SHAPE[:WEIGHTS].",
)
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
    run = _guard(lambda: sim_run(suite, plan.arm, costs))
    try:
        doc = {"arm": plan.desc.to_json(), "runs": [run.to_json()]}
        write_atomic(out, strict_json(doc, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"run JSON not written: {out}: {exc.strerror or exc}") from None
    print_run(Console(), [run])
    s = run.simulated or Simulation()
    click.echo(f"simulated with {s.name} ({s.source}) in {s.wall_s or 0:.2f} s")
    click.echo(f"run JSON: {out}")
    if not run.valid:
        sys.exit(EXIT_INVALID)


def _real(suite: Suite, arm: Arm, trace: Path | None, quiet: bool, label: str = "") -> Run:
    if trace is not None:
        arm = replace(arm, flags=f"{arm.flags} --step-trace {shlex.quote(str(trace))}".strip())
    with tempfile.TemporaryDirectory(prefix="servegate-sim-") as logs:
        log = Path(logs) / f"{suite.name}.log"
        title = f"{label or suite.name} (real) "
        with LiveProgress(Console(stderr=True), title, disabled=quiet) as progress:
            try:
                return Run.from_json(to_plain(run_arm(suite, arm, log, progress)), "the run")
            except LaunchError as exc:
                raise InputError(f"{suite.name}: {exc}") from None


def _cases(names: list[str], levels: list[float], ref, model) -> list[tuple[str, Suite, Arm]]:
    """(case, suite, arm) per suite, and the sweep's levels as one suite (one cold server
    runs them in ascending order, as `harness sweep` does)."""
    out = []
    for name in names:
        suite, plan = _guard(lambda n=name: _arm(n, ref, None, model))
        out.append((suite.name, suite, plan.arm))
    if levels:
        suite, plan = _guard(lambda: _arm("sweep", ref, None, model))
        out.append(("sweep", Sweep(suite, "concurrency", levels).units()[0], plan.arm))
    return out


def _validate(cases, costs, repeat: int, quiet: bool, reals=None, traces=None):
    """Per case: `repeat` real runs (or the given ones; each writing its steps to traces[i] if
    given), then one simulated run priced by `costs(i)`; the rows and whether the scheduler's
    decisions were the same."""
    table, verdicts = [], {}
    runs = reals or [
        [_real(suite, arm, traces[i] if traces else None, quiet, f"{case} {k + 1}/{repeat}")
         for k in range(repeat)]
        for i, (case, suite, arm) in enumerate(cases)
    ]  # fmt: skip
    for i, (case, suite, arm) in enumerate(cases):
        simulated = _guard(lambda s=suite, a=arm, i=i: sim_run(s, a, costs(i)))
        if case != "sweep":
            table += rows(case, [r.summary for r in runs[i]], simulated.summary)
            verdicts[case] = decisions(runs[i], simulated)
            continue
        for level in [p.name for p in suite.phases]:
            table += rows(f"sweep {level}", [stats(r, level) for r in runs[i]],
                          stats(simulated, level))  # fmt: skip
            verdicts[f"sweep {level}"] = decisions(runs[i], simulated, [level])
    return table, verdicts


def stats(run: Run, phase: str) -> dict[str, float | None]:
    return (run.phases or {})[phase].stats or {}


def _cpu(facts: dict) -> str:
    return facts.get("cpu_model") or platform.processor() or "this CPU"


def _fit(traces: list[Path], out: Path, arm: Arm, what: str) -> str:
    """Fit a cost model to step traces in the arm's checkout; its fit error line."""
    source = f"{arm.model} on {_cpu(machine_facts())}, {what}, {date.today().isoformat()}"
    argv = [arm.python or sys.executable, "-m", "engine.sim", "fit", *map(str, traces),
            "--out", str(out.resolve()), "--name", out.stem, "--source", source,
            "--model", arm.model]  # fmt: skip
    done = subprocess.run(argv, cwd=arm.cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise InputError(f"the fit failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout.strip()


def _leave_one_out(cases, traces: list[Path], folder: Path):
    """costs(i): a cost model fitted to every other case's steps (fitted when first asked)."""

    def costs(i: int) -> str:
        out = folder / f"without-{cases[i][0]}.json"
        others = [t for k, t in enumerate(traces) if k != i and t.is_file()]
        _fit(others, out, cases[i][2], f"steps of {len(others)} other cases")
        return str(out)

    return costs


def _emit(table, verdicts, repeat: int, out: Path | None, command: str) -> None:
    text = markdown(table, verdicts, repeat)
    click.echo(text, nl=False)
    if out is None:
        return
    facts = machine_facts()
    cpu = _cpu(facts)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    write_atomic(out, f"`{command}`, {when}, on {cpu}.\n\n{text}")
    payload = {"command": command, "created": when, "machine": facts}
    write_atomic(out.with_suffix(".json"),
                 strict_json(payload | as_json(table, verdicts), indent=1) + "\n")  # fmt: skip
    click.echo(f"table: {out}")


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
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Runs per suite, each cold: the fit sees every shape at several moments "
              "(a machine whose speed drifts is averaged over them).")  # fmt: skip
@click.option("--steps", "keep", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Keep the measured step trace here (JSONL; python -m engine.sim score "
              "prices it with any cost model).")  # fmt: skip
@click.option("--quiet", is_flag=True)
def calibrate(out, suites, ref, repeat, keep, quiet) -> None:
    """Run suites on the real engine with its step trace on, fit a cost model to the steps,
    write it, and print the simulated runs of the same suites against the real ones."""
    out = _guard(lambda: writable_file(out))
    keep = keep and _guard(lambda: writable_file(keep))
    cases = _cases(list(suites or CALIBRATION), [], ref, None)
    with tempfile.TemporaryDirectory(prefix="servegate-steps-") as steps:
        trace = Path(steps) / "steps.jsonl"
        reals = [[_real(suite, arm, trace, quiet, f"{case} {k + 1}/{repeat}")
                  for k in range(repeat)] for case, suite, arm in cases]  # fmt: skip
        errors = _fit([trace], out, cases[0][2], f"{len(cases)} suites x {repeat}")
        if keep is not None:
            shutil.copyfile(trace, keep)
    click.echo(f"cost model: {out} (fit error per family: {errors})")
    table, verdicts = _validate(cases, lambda i: str(out), repeat, quiet, reals)
    _emit(table, verdicts, repeat, None, harness_command())


@sim.command("validate")
@click.option("--costs", type=COSTS, default=None, help="The cost model to check.")
@click.option("--leave-one-out", "loo", is_flag=True,
              help="Instead of --costs: price each case with a model fitted to the steps "
              "of the other cases' real runs in this session (held out).")  # fmt: skip
@click.option("--suite", "suites", multiple=True, metavar="NAME_OR_PATH",
              help=f"Suites to run both ways [default: {', '.join(VALIDATION)}].")  # fmt: skip
@click.option("--levels", default=None, metavar="1,2,4,...",
              help="Also the sweep suite at these client counts, one cold server for all "
              "[default without --suite: 1,2,4,8,16].")  # fmt: skip
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Real runs per case (each cold): the error is against their median, "
              "their spread shown beside it.")  # fmt: skip
@click.option("--model", default=None, help="Model for every case [default: each suite's].")
@click.option("--ref", default=None, metavar="REF")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the table (Markdown, with the command and machine) and a "
              "JSON beside it.")  # fmt: skip
@click.option("--quiet", is_flag=True)
def validate(costs, loo, suites, levels, repeat, model, ref, out, quiet) -> None:
    """Run suites (and a sweep's levels) for real and simulated; print each metric's error
    against the real runs, their own spread, and whether the scheduler decided the same."""
    if (costs is None) == (not loo):
        raise InputError("give --costs or --leave-one-out (one of them)")
    if out is not None:
        out = _guard(lambda: writable_file(out))
    try:
        given = levels if levels is not None else (None if suites else "1,2,4,8,16")
        steps = parse_levels(given, "concurrency") if given else []
    except SweepError as exc:
        raise input_error(exc) from None
    cases = _cases(list(suites or VALIDATION), steps, ref, model)
    if not loo:
        table, verdicts = _validate(cases, lambda i: costs, repeat, quiet)
    else:
        if len(cases) < 2:
            raise InputError("--leave-one-out needs two cases or more")
        with tempfile.TemporaryDirectory(prefix="servegate-steps-") as folder:
            traces = [Path(folder) / f"{case}.jsonl" for case, _, _ in cases]
            fits = _leave_one_out(cases, traces, Path(folder))
            table, verdicts = _validate(cases, fits, repeat, quiet, traces=traces)
    _emit(table, verdicts, repeat, out, harness_command())
