"""`harness merge`: a CI matrix's results as one answer (docs/ci.md, "Shards")."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from harness.cli.errors import InputError
from harness.cli.finish import write_summary
from harness.cli.outputs import OutputError, checked_summary
from harness.files import open_append
from harness.report.merge import merged_markdown, read_shard, worst
from harness.results.errors import ComparisonError


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--summary",
    "summary_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Append the merged table to FILE too (and to $GITHUB_STEP_SUMMARY when set).",
)
def merge(results, summary_file):
    """Merge the results of several A/B, sweep or bisect jobs (a CI matrix's shards) into one
    table of suite x machine x metric -> verdict, and exit with the worst shard's code:
    2 if any is invalid, else 1 if any regressed, else 0. In a GitHub Actions step it also
    sets the step's outputs `verdict` and `exit-code`.

    \b
    harness merge results/*-boundary-spill-*.json results/*-long-transient-*.json
    """
    try:
        if summary_file:
            checked_summary(summary_file, results)  # never a result (nor any JSON)
        shards = [read_shard(p) for p in results]
    except (ComparisonError, OSError) as exc:
        raise InputError(str(exc) if isinstance(exc, ComparisonError | OutputError) else
                         f"{exc.filename}: {exc.strerror or exc}") from None  # fmt: skip
    text = merged_markdown(shards)
    click.echo(text, nl=False)
    write_summary(lambda: text, summary_file)
    verdict, code = worst(shards)
    step_outputs({"verdict": verdict, "exit-code": str(code)})
    sys.exit(code)


def step_outputs(values: dict[str, str]) -> None:
    """A GitHub Actions step's outputs (`steps.ID.outputs.verdict`), when $GITHUB_OUTPUT is
    set; a file that cannot be written is one `error:` line and leaves the exit code alone."""
    if not (path := os.environ.get("GITHUB_OUTPUT")):
        return
    try:
        with open_append(Path(path)) as f:
            f.writelines(f"{k}={v}\n" for k, v in values.items())
    except OSError as exc:
        click.echo(f"error: step outputs not written: {path}: {exc.strerror or exc}", err=True)
