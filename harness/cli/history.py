"""`harness history` and `harness publish`: the results of successive commits of main as
histories, their change points, and a static site of them (docs/history.md)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import InputError
from harness.cli.outputs import OutputError, writable_dir
from harness.escape import terminal
from harness.history.points import Series, collect, series
from harness.history.site import publish as write_site
from harness.report.tables import fmt_value
from harness.results.errors import ComparisonError

FOLDER = click.argument(
    "folder", type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="DIR"
)


def _series(
    folder: Path, suite: str | None, metric: str | None, exclude: Path | None = None
) -> list[Series]:
    found, skipped = collect(folder, exclude)
    for line in skipped:
        click.echo(f"skipped: {terminal(line)}", err=True)
    found = [s for s in found if suite in (None, s.suite) and metric in (None, s.metric)]
    if not found:
        wanted = " ".join(f"{k} {v}" for k, v in (("suite", suite), ("metric", metric)) if v)
        raise InputError(
            f"{folder}: no run of a commit{' for ' + wanted if wanted else ''} (results of "
            "`harness run --ref REF --out DIR/...` or `harness ab --out-dir DIR`)"
        )
    return series(found)


def describe(s: Series) -> list[str]:
    n = len(s.changes)
    lines = [f"{s.key}: {len(s.points)} commit(s), {n} change point{'s' if n != 1 else ''}"]
    for c in s.changes:
        p = s.points[c.index]
        lines.append(
            f"  {'worse' if s.worse(c) else 'better'} from {p.sha[:10]} {p.date[:10]} "
            f"{p.subject!r}: {fmt_value(s.metric, c.before)} -> {fmt_value(s.metric, c.after)}, "
            f"{c.ratio:.3f}x, confidence {c.confidence:.1%}"
        )
    return lines


OPTIONS = (
    click.option("--suite", default=None, help="Only this suite."),
    click.option("--metric", default=None, help="Only this metric (e.g. ttft_p50_ms)."),
)


def _with_options(command):
    for option in reversed(OPTIONS):
        command = option(command)
    return command


@click.command()
@FOLDER
@_with_options
def history(folder, suite, metric):
    """Find the steps in a history of commits: for each suite x machine x metric of the
    results under DIR (one point per commit, in first-parent order), the change points, each
    with its first commit, the level before and after, the ratio and a confidence.

    Change points are found by E-Divisive means with a permutation test (docs/history.md): on
    a history of pure noise it names one in about 1 of 200; a step of a few percent, far below
    any gate's tolerance, is named once about six commits on each side show it.

    \b
    harness run --ref HEAD --suite short-concurrency --out history/$(git rev-parse HEAD).json
    harness history history/
    """
    for s in _series(folder, suite, metric):
        click.echo("\n".join(terminal(line) for line in describe(s)))  # names from results


@click.command()
@FOLDER
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("site"),
    show_default=True,
    help="The folder to write the site to (index.html and the results it links).",
)
@_with_options
def publish(folder, out, suite, metric):
    """Write a static site of the histories under DIR: one chart per suite x machine x metric
    over commits, change points and A/B verdicts marked, each point linking to its result.
    Nothing is fetched when it is viewed: open OUT/index.html from disk or any file host."""
    all_series = _series(folder, suite, metric, exclude=out)  # never its own output
    try:
        writable_dir(out)
        index = write_site(all_series, folder, out)
    except (OutputError, ComparisonError, OSError) as exc:
        raise InputError(f"site not written: {exc}") from None
    click.echo(f"site: {index} ({len(all_series)} chart(s))")
