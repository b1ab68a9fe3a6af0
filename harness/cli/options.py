"""Command-line options shared by the verbs that start servers and write a report
(`ab`, `sweep`, `bisect`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import click

from harness.arms.project import (
    RESIDENCY,
)
from harness.load.workers import STREAMS_PER_PROC
from harness.results.verdicts import INCONCLUSIVE_CHOICES
from harness.sim.costs import check_costs
from harness.sim.workload import SimError
from harness.stats.sequential import AUTO_MAX_ROUNDS
from harness.workload.suite import (
    DEFAULT_SUITE,
    SuiteError,
    parse_client_procs,
)


class Finite(click.ParamType):
    """A finite number in (low, high] (click's FloatRange lets nan through)."""

    name = "number"

    def __init__(self, low: float, high: float, what: str) -> None:
        self.low, self.high, self.what = low, high, what

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (math.isfinite(x) and self.low < x <= self.high):
            self.fail(f"{value!r} must be a finite {self.what}", param, ctx)
        return x


SECONDS = Finite(0, math.inf, "number of seconds > 0")
ROUNDS, MAX_ROUNDS = 3, 9  # a gate's first look, and its last
RATE = Finite(0, math.inf, "rate > 0 (requests per second)")


class ClientProcs(click.ParamType):
    """--client-procs: a count of processes, or `auto` (enough for the streams, up to the cores)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        try:
            return parse_client_procs(value)
        except SuiteError as exc:
            self.fail(str(exc), param, ctx)


class MaxRounds(click.ParamType):
    """--max-rounds: a count of rounds, or `auto` (the last look set by the noise measured)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        if str(value).strip().lower() == "auto":
            return "auto"
        try:
            n = int(value)
        except ValueError:
            self.fail(f"{value!r} is neither a whole number nor 'auto'", param, ctx)
        if not 2 <= n <= 200:
            self.fail(f"{n} is not in the range 2<=x<=200", param, ctx)
        return n


def check_rounds(rounds: int, max_rounds: int | str) -> tuple[int, int | None]:
    """(the last look planned, the furthest `--max-rounds auto` may move it, else None)."""
    if isinstance(max_rounds, str):  # "auto": click's choice allows no other word
        return max(MAX_ROUNDS, rounds), max(AUTO_MAX_ROUNDS, rounds)
    if max_rounds < rounds:
        raise click.BadParameter(
            f"{max_rounds} is below --rounds {rounds} (the first look)", param_hint="--max-rounds"
        )
    return max_rounds, None


def report_options(command: Callable) -> Callable:
    """--out-dir, --ready-timeout and --quiet, as every such verb takes them."""
    for option in reversed(
        (
            click.option(
                "--out-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=Path("results"),
                show_default=True,
                help="Where the report goes.",
            ),
            click.option(
                "--ready-timeout",
                type=SECONDS,
                default=None,
                help="Seconds to wait for each cold server to answer /health [default: the "
                "project file's ready_timeout, else 180].",
            ),
            click.option("--quiet", is_flag=True, help="No live progress display."),
            click.option(
                "--summary",
                "summary_file",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                metavar="FILE",
                help="Append a short Markdown summary (the verdict first, for a pull request) "
                "to FILE; it also goes to $GITHUB_STEP_SUMMARY when that is set.",
            ),
        )
    ):
        command = option(command)
    return command


def workload_options(command: Callable) -> Callable:
    """--clients, --requests, --prompt-tokens, --max-tokens and --rate: replace the suite's in
    every measured phase (a first look without writing TOML; the fingerprint follows); and
    --client-procs, how many processes fire them."""
    for option in reversed(
        (
            click.option(
                "--clients",
                type=click.IntRange(1),
                default=None,
                help="Concurrent clients in every measured phase [default: the suite's].",
            ),
            click.option(
                "--requests",
                type=click.IntRange(1),
                default=None,
                help="Requests per measured phase [default: the suite's].",
            ),
            click.option(
                "--prompt-tokens",
                type=click.IntRange(1),
                default=None,
                help="Every prompt exactly this many tokens [default: the suite's].",
            ),
            click.option(
                "--max-tokens",
                type=click.IntRange(1),
                default=None,
                help="Output tokens per request [default: the suite's].",
            ),
            click.option(
                "--rate",
                type=RATE,
                default=None,
                metavar="REQ_S",
                help="Poisson arrivals at this many requests/s instead of the suite's arrival.",
            ),
            click.option(
                "--client-procs",
                type=ClientProcs(),
                default=None,
                metavar="N|auto",
                help="Fire the requests from N client processes, each with its own event loop "
                f"(the same workload: its fingerprint stays); auto: one per {STREAMS_PER_PROC} "
                "streams, up to the usable cores [default: the suite's client_procs, else "
                "auto]. A run whose client fell behind is INVALID and says so.",
            ),
        )  # fmt: skip
    ):
        command = option(command)
    return command


def api_key_option(command: Callable) -> Callable:
    return click.option(
        "--api-key",
        envvar="OPENAI_API_KEY",
        default="",
        metavar="KEY",
        help="Sent to every arm as `Authorization: Bearer KEY` [env: OPENAI_API_KEY].",
    )(command)


def residency_option(command: Callable) -> Callable:
    return click.option(
        "--residency",
        type=click.Choice(RESIDENCY),
        default=None,
        help="How many of a round's servers are up at once: one-at-a-time (start, measure, "
        "stop, then the next: for servers that hold a whole GPU) or together (a round's "
        "servers start at once). [default: servegate.toml's [server] residency, else "
        "one-at-a-time]",
    )(command)


def budget_option(command: Callable) -> Callable:
    return click.option(
        "--budget-minutes",
        type=Finite(0, 7 * 24 * 60, "number of minutes > 0"),
        default=None,
        help="The job's time, counted from the harness's start (builds included): rounds are "
        "planned to end inside it, and when it ends before the gate decides, the verdict is "
        "INCONCLUSIVE with the smallest change the rounds could resolve. [default: "
        "servegate.toml's [gate] budget_minutes, else none]",
    )(command)


def inconclusive_option(command: Callable) -> Callable:
    return click.option(
        "--inconclusive",
        type=click.Choice(INCONCLUSIVE_CHOICES),
        default=None,
        help="What a gate that cannot decide exits with: pass (0) or fail (1; the verdict stays "
        "INCONCLUSIVE, said as failing). [default: servegate.toml's [gate] inconclusive, else "
        "pass]",
    )(command)


def quiet_wait_option(command: Callable) -> Callable:
    return click.option(
        "--wait-for-quiet",
        "quiet_wait_s",
        type=SECONDS,
        default=None,
        metavar="SECONDS",
        help="Before each round, wait up to SECONDS while other processes keep more than a "
        "quarter of a core busy (sampled a second at a time). Every round records the cores "
        "others used during it, the CPU steal and the load either way.  [default: no wait]",
    )(command)


SUITE_HELP = (
    "A shipped suite (`harness suites`) or a .toml path. [default: servegate.toml's [gate] "
    f"suite, else {DEFAULT_SUITE}]"
)


def devices_option(command: Callable) -> Callable:
    return click.option(
        "--devices",
        default=None,
        metavar="0,1",
        help="Devices the arms run on ({device} in the serve command, and CUDA_VISIBLE_DEVICES "
        "or the project file's device_env). Two or more: a round's arms run at once, one per "
        "device, and swap devices every round so a faster device favours neither; the gate "
        "judges whole device cycles. Groups joined by + (0+1,2+3) give each arm several, for "
        "a tensor-parallel server: {devices} is the group (0,1), {device} its first. One: "
        "every arm there, one at a time (unless --residency together). "
        "[default: servegate.toml's [server] devices, else none]",
    )(command)


def side_options(command: Callable) -> Callable:
    """--base-cmd/--head-cmd, --*-url, --*-pid, --*-env, --*-flags: how each arm differs."""
    for arm in ("head", "base"):
        for name, kind, metavar, text in (
            ("cmd", None, "TEMPLATE", "Start the {arm} arm from a command template with "
             "{{port}} (any OpenAI-compatible server) instead of a git ref of the project."),
            ("url", None, "URL", "Measure a server already running at URL as the {arm} arm."),
            ("pid", int, "PID", "With --{arm}-url: its pid, so its memory is sampled (and gated)."),
            ("env", None, "'K=V ...'", "Environment settings for the {arm} arm's server."),
            ("flags", None, "'FLAGS'", "Server flags added for the {arm} arm only (its command "
             "must have {{flags}})."),
        ):  # fmt: skip
            command = click.option(
                f"--{arm}-{name}",
                type=kind,
                default=None if name in ("cmd", "url", "pid") else "",
                metavar=metavar,
                help=text.format(arm=arm),
            )(command)
    return command


def rounds_options(command: Callable) -> Callable:
    """--rounds and --max-rounds: the gate's sequential plan (ab, and check's estimate)."""
    for option in reversed(
        (
            click.option(
                "--rounds",
                type=click.IntRange(2, 100),
                default=ROUNDS,
                show_default=True,
                help="Rounds before the first look; each starts every arm cold, in rotating "
                "(ABBA) order.",
            ),
            click.option(
                "--max-rounds",
                type=MaxRounds(),
                default=MAX_ROUNDS,
                show_default=True,
                help="Looks at --rounds, +2, +4, ... up to this: rounds are added while a "
                "metric is INCONCLUSIVE and none REGRESSED; each look spends its share of the "
                "gate's 1% false-regression budget (docs/statistics.md). `auto`: up to "
                f"{MAX_ROUNDS}, then as far as the undecided metrics' measured noise needs "
                f"(at most {AUTO_MAX_ROUNDS}, or what --budget-minutes holds).",
            ),
        )
    ):
        command = option(command)
    return command


def project_option(command: Callable) -> Callable:
    return click.option(
        "--project",
        "project_file",
        envvar="SERVEGATE_PROJECT",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help="The project file that says how to build and serve a commit [default: "
        "servegate.toml at the repository's root; env: SERVEGATE_PROJECT]. CI passes the "
        "base branch's, so a pull request cannot change how it is judged. For arms given by "
        "command or URL, what it says of any server applies: its device-memory gauges, its "
        "device variable, its budget.",
    )(command)


def dry_run_option(command: Callable) -> Callable:
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Say what each arm would be (ref, commit, command, flags) and exit 0: refs are "
        "resolved with git alone; nothing is checked out, built, started or written. With "
        "--sim, the simulator's command for each arm.",
    )(command)


class BadFile(click.ClickException):
    """A file an option names that cannot be used: one `Error:` line, exit 2."""

    exit_code = 2


class CostsParam(click.ParamType):
    """A cost model for the simulator: a JSON file (made absolute: the simulator runs in the
    arm's checkout) or HARDWARE:SHAPE[:WEIGHTS], a roofline from the engine's data files."""

    name = "COSTS"

    def convert(self, value, param, ctx):
        path = Path(value)
        if path.is_file() or (path.exists() and not path.is_dir()):  # a FIFO: refused below
            try:
                check_costs(path)
            except SimError as exc:  # one line, as every bad input file is (no usage)
                raise BadFile(str(exc)) from None
            return str(path.resolve())
        if re.fullmatch(r"[\w.-]+:[^:]+(:[\w]+)?", str(value)) and not path.exists():
            return str(value)
        self.fail(f"{value}: no such file, nor HARDWARE:SHAPE (e.g. h200:llama-3-8b)", param, ctx)


COSTS = CostsParam()
