"""The `harness` command line: `harness run` measures one arm, `harness suites` lists suites.
Exit codes: 0 ok, 2 invalid run, infrastructure failure or server crash (and bad input)."""

from __future__ import annotations

import contextlib
import gc as collector
import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape as markup_escape

from harness.arms.arms import ArmError
from harness.arms.launcher import LaunchError
from harness.arms.project import ProjectError
from harness.arms.worktrees import RefError
from harness.cli import signals
from harness.cli.ab import ab, compare, report
from harness.cli.bisect import bisect
from harness.cli.check import check
from harness.cli.context import arm_context
from harness.cli.errors import EXIT_INVALID, InputError, input_error, one_line
from harness.cli.export import export
from harness.cli.gc import gc
from harness.cli.history import history, publish
from harness.cli.init import init
from harness.cli.merge import merge
from harness.cli.options import (
    SECONDS,
    api_key_option,
    dry_run_option,
    project_option,
    workload_options,
)
from harness.cli.outputs import OutputError, writable_file
from harness.cli.plan_lines import client_line, print_plan
from harness.cli.sim import sim
from harness.cli.sweep import sweep
from harness.escape import terminal
from harness.names import claim_file, release
from harness.report.display import LiveProgress
from harness.report.terminal import print_run
from harness.results import store
from harness.results.run import Run
from harness.runs.machine import harness_version
from harness.runs.measure import run_arm
from harness.runs.plan import Side, default_refs, plan_arm
from harness.workload.arrival import Burst, Concurrency, Rate, Replay
from harness.workload.phase import Phase
from harness.workload.suite import (
    CI_SUITES,
    DEFAULT_SUITE,
    SuiteError,
    load_suite,
    override,
    shipped,
)


class GuardedGroup(click.Group):
    """Every verb under one guard: an unexpected exception is one `Error:` line and exit 2,
    never a traceback, whose exit code 1 would read as "regression"."""

    def invoke(self, ctx: click.Context):
        signals.install()
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:  # `harness suites | head -1`: nothing is left to say; not exit 1
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except KeyboardInterrupt:  # click would make it "Aborted!", exit 1: a "regression"
            click.echo("interrupted: nothing was left running", err=True)
            sys.exit(signals.exit_code())
        except Exception as exc:  # noqa: BLE001 - the guard of last resort
            if os.environ.get("HARNESS_TRACEBACK"):
                traceback.print_exc()
            raise InputError(
                f"internal error: {type(exc).__name__}: {exc} (a bug: please report it)"
            ) from None
        finally:  # the interpreter's teardown need not walk pandas' and matplotlib's objects
            collector.freeze()


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(harness_version(), prog_name="harness")
def main() -> None:
    """Benchmark and gate LLM inference servers.

    \b
    harness ab --base main --head HEAD A/B two refs under load; exit 1 on a regression
    harness sweep --levels 1,2,4,8     load curves, the knee; A/B them per level
    harness bisect --good REF          name the commit that introduced a regression
    harness merge RESULT.json...       a CI matrix's results as one table, the worst exit code
    harness history DIR                steps in the results of successive commits of main
    harness publish DIR --out SITE     a static site of those histories, one chart each
    harness gc                         remove cached commit worktrees unused for 14 days
    harness export RUN.json --out F    a run in vLLM's `bench serve` result shape
    harness sim run --suite S --costs C the engine's scheduler on a virtual clock, in seconds
    harness suites                     list the shipped load suites
    harness init                       write servegate.toml and a CI workflow for this repository
    harness check                      build HEAD, send one request, say what a gate costs
    harness run --suite smoke          start the working tree's server cold and measure it
    harness run --suite smoke --serve-cmd "llama-server -m M.gguf --port {port}"
    harness run --suite smoke --url http://127.0.0.1:8000 --pid 1234
    """


@main.command()
@click.option(
    "--suite",
    "suite_name",
    required=True,
    metavar="NAME_OR_PATH",
    help="A shipped suite name (see `harness suites`) or a path to a suite .toml.",
)
@click.option("--model", default=None, help="Model to serve and request [default: the suite's].")
@click.option(
    "--flags",
    default=None,
    help="Server flags, replacing the suite's `flags` (quote them as one argument).",
)
@click.option(
    "--ref",
    default=None,
    metavar="REF",
    help="Serve this git ref of the project, built and started as servegate.toml says "
    "[default: the working tree].",
)
@click.option(
    "--serve-cmd",
    default=None,
    metavar="TEMPLATE",
    help="Start any OpenAI-compatible server instead of the project's. "
    "{port} is required; {model}, {flags}, {worktree} and {python} are filled in too.",
)
@click.option("--url", default=None, help="Measure a server that is already running here.")
@click.option(
    "--pid",
    type=int,
    default=None,
    help="With --url: the server's pid, so its memory can be sampled.",
)
@click.option(
    "--repeat",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Runs to make, each from a cold start.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run JSON to write [default: results/runs/<time>-<suite>.json].",
)
@click.option(
    "--ready-timeout",
    type=SECONDS,
    default=None,
    help="Seconds to wait for the server to answer /health [default: the project file's "
    "ready_timeout, else 180].",
)
@click.option("--quiet", is_flag=True, help="No live progress display.")
@workload_options
@api_key_option
@dry_run_option
@project_option
def run(
    suite_name,
    model,
    flags,
    ref,
    serve_cmd,
    url,
    pid,
    repeat,
    out,
    ready_timeout,
    quiet,
    clients,
    requests,
    prompt_tokens,
    max_tokens,
    rate,
    client_procs,
    api_key,
    dry_run,
    project_file,
) -> None:
    """Start one arm cold, drive the suite's phases, print the summary, write the run JSON.

    The default arm is the working tree of the repository you are in, built and served as its
    servegate.toml says (in this repository: the reference engine). Exits 0 when every run is
    valid; 2 when a run is invalid (a phase's expected counters did not move, or more
    requests failed than the suite allows), the server crashed or never became ready.

    \b
    harness run --suite smoke
    harness run --suite suites/my.toml --flags "--max-batch-prefill-tokens 2048" --repeat 3
    harness run --suite smoke --serve-cmd "llama-server -m M.gguf --port {port}"
    harness run --suite smoke --ref main~3
    """
    try:
        suite = override(load_suite(suite_name), clients=clients, requests=requests,
                         prompt_tokens=prompt_tokens, max_tokens=max_tokens, rate=rate,
                         client_procs=client_procs)  # fmt: skip
        named, out = out is not None, _run_json(out, suite.name, dry_run)
        sides = default_refs({"arm": Side(ref=ref, cmd=serve_cmd, url=url, pid=pid)})
        ctx = arm_context(sides, suite, model, flags, False, api_key, not dry_run, project_file)
        plan = plan_arm("arm", sides["arm"], ctx)
    except (SuiteError, ArmError, RefError, ProjectError, OutputError) as exc:
        raise input_error(exc) from None
    if dry_run:
        print_plan({"arm": plan})
        if line := client_line(suite):
            click.echo(line)
        return
    if not named:  # a name of its own, never another run's (two runs in the same second)
        out = claim_file(out.parent, [out.stem], ".json", (".server1.log",))
    try:
        _run(suite, plan, out, repeat, ready_timeout, quiet)
    finally:
        if not named:
            release(out)  # the name claimed, if no run was written to it


def _run_json(out: Path | None, suite: str, dry_run: bool) -> Path:
    """Where the run JSON goes: OUT, else results/runs/STAMP-SUITE.json; checked writable
    unless it is a dry run (which writes nothing)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = out or Path("results/runs") / f"{stamp}-{suite}.json"
    return out if dry_run else writable_file(out)


def _run(suite, plan, out: Path, repeat: int, ready_timeout: float | None, quiet: bool) -> None:
    arm = plan.arm
    console = Console(stderr=True)
    runs = []
    try:
        for i in range(repeat):
            log = out.with_name(f"{out.stem}.server{i + 1}.log")
            label = f"run {i + 1}/{repeat} " if repeat > 1 else ""
            with LiveProgress(console, label, disabled=quiet) as progress:
                runs.append(run_arm(suite, arm, log, progress, ready_timeout_s=ready_timeout))
    except LaunchError as exc:
        console.print(f"[bold red]error:[/] {markup_escape(one_line(exc))}", highlight=False)
        if exc.log_tail:
            tail = terminal(exc.log_tail, multiline=True)
            console.print(f"server log tail:\n{tail}", markup=False, highlight=False)
        _keep(runs, plan.desc.to_json(), out, console)
        sys.exit(EXIT_INVALID)
    except KeyboardInterrupt:
        console.print("interrupted: the server was stopped", highlight=False)
        _keep(runs, plan.desc.to_json(), out, console)
        sys.exit(signals.exit_code())
    try:
        store.save({"arm": plan.desc.to_json(), "runs": runs}, out, indent=1)
    except OSError as exc:
        raise InputError(f"run JSON not written: {out}: {exc.strerror or exc}") from None
    print_run(Console(), [Run.from_json(r, f"runs[{i}]") for i, r in enumerate(runs)])
    click.echo(f"run JSON: {out}")
    if not all(r["valid"] for r in runs):
        sys.exit(EXIT_INVALID)


def _keep(runs: list[dict], arm: dict, out: Path, console: Console) -> None:
    """The runs that finished before a failure or an interrupt: never lost."""
    if runs:
        with contextlib.suppress(OSError):
            doc = {"arm": arm, "runs": runs, "complete": False}
            store.save(doc, out, indent=1)
            console.print(f"the {len(runs)} finished run(s): {out}", highlight=False)


def phase_words(p: Phase) -> str:
    """A phase in plain words: `main: 4 requests at once, 3 times`."""
    n = f"{p.requests} request{'s' * (p.requests != 1)}"
    match p.arrival:
        case Burst(bursts=bursts):
            said = f"{n} at once" + (f", {bursts} times" if bursts > 1 else "")
        case Concurrency():
            said = f"{n} from {p.clients} client{'s' * (p.clients != 1)} in a closed loop"
        case Replay():
            said = f"{n} at a trace's times"
        case Rate(rate=rate):
            said = f"{n} at {rate:g}/s"
    return f"{p.name}: {said}"


def suite_rows() -> list[tuple[str, str, str, str, str]]:
    """(name, marks, model, phases, description) of every shipped suite; marks: `default`
    (what ab and bisect run without --suite) and `CI` (gated on every pull request)."""
    rows = []
    for name in shipped():
        suite = load_suite(name)
        marks = ", ".join(m for m, on in (("default", name == DEFAULT_SUITE),
                                          ("CI", name in CI_SUITES)) if on)  # fmt: skip
        phases = "; ".join(phase_words(p) for p in suite.phases)
        rows.append((name, marks, suite.model, phases, suite.description))
    return rows


@main.command()
def suites() -> None:
    """List the shipped suites (suites/*.toml): name, marks, model, phases, description.

    Each phase says how its requests arrive: all at once (a burst, repeated B times per
    run), from C clients in a closed loop (each sends its next request when its last one
    ends), at a rate, or at a trace's times. Marks: default, what `harness ab` and `harness
    bisect` run without --suite; CI, a suite the pull-request workflow
    (.github/workflows/servegate.yml) gates."""
    rows = [("suite", "marks", "model", "phases", "")] + suite_rows()
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for name, marks, model, phases, description in rows:
        cells = [c.ljust(w) for c, w in zip((name, marks, model), widths, strict=True)]
        click.echo(terminal("  ".join([*cells, phases]).rstrip()))
        if description:
            click.echo(terminal(" " * (widths[0] + 2) + description))
    click.echo(f"default: run without --suite; CI: gated on every pull request "
               f"({', '.join(CI_SUITES)})")  # fmt: skip


main.add_command(ab)
main.add_command(compare)
main.add_command(report)
main.add_command(sweep)
main.add_command(bisect)
main.add_command(merge)
main.add_command(history)
main.add_command(publish)
main.add_command(gc)
main.add_command(export)
main.add_command(sim)
main.add_command(init)
main.add_command(check)


if __name__ == "__main__":
    main()
