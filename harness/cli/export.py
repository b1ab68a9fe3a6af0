"""`harness export`: a saved run in another tool's result shape (vLLM's `bench serve`)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import InputError
from harness.cli.outputs import OutputError, same_file, writable_file
from harness.files import strict_json, write_atomic
from harness.names import claim_file
from harness.report.vllm_export import vllm_result
from harness.results import store
from harness.results.checked import check_exportable
from harness.results.errors import ComparisonError
from harness.results.run import Run
from harness.results.saved import runs_of


@click.command()
@click.argument("run_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The file to write (never the input; an existing OUT only with --force); a run JSON "
    "of N runs writes OUT, OUT-2, ... one per run, each numbered one under a free name when "
    "that one exists (never replaced).",
)
@click.option("--label", default="servegate", show_default=True, help="vLLM's `label` key.")
@click.option("--force", is_flag=True, help="Replace OUT if it exists (never the input).")
def export(run_json, out, label, force):
    """Write the runs of a `harness run` JSON in vLLM's `vllm bench serve --save-result` shape
    (its keys: completed, request_throughput, output_throughput, mean_/median_/std_/p50..p99_
    of ttft, tpot, itl and e2el in ms, and the per-request lists), for tools that read those.
    The runs must keep their per-request records (a run JSON does)."""
    try:
        doc = store.load(run_json)
        runs = runs_of(doc)
        if not runs or not all(isinstance(r.get("requests"), list) for r in runs):
            raise ComparisonError(f"{run_json}: no per-request records to export")
        check_exportable(runs, run_json)
        if same_file(out, run_json):
            raise OutputError(f"--out {out} is the input {run_json}: not replaced")
        writable_file(out)
        if out.exists() and not force:
            raise OutputError(f"--out {out} exists: not replaced (--force replaces it)")
        # OUT is named; OUT-2, ... are not: each claimed under a free name (never replaced)
        paths = [out] + [
            claim_file(out.parent, [f"{out.stem}-{i}"], out.suffix) for i in range(2, 1 + len(runs))
        ]  # fmt: skip
    except (ComparisonError, OSError) as exc:
        raise InputError(str(exc)) from None
    for i, (run, path) in enumerate(zip(runs, paths, strict=True), 1):
        said = vllm_result(Run.from_json(run, f"runs[{i - 1}]"), label)
        write_atomic(path, strict_json(said, indent=1) + "\n")
        wanted = out.with_name(f"{out.stem}-{i}{out.suffix}")
        taken = f" ({wanted.name} exists: not replaced)" if i > 1 and path != wanted else ""
        click.echo(f"vLLM result: {path}{taken}")
