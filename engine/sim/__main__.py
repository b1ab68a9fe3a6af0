"""`python -m engine.sim`: the harness's way into the engine's scheduler on a virtual clock.

    python -m engine.sim run --workload W.json --costs C.json [--model M] [serve flags...]
    python -m engine.sim fit TRACE.jsonl... --out C.json --name NAME --source TEXT
    python -m engine.sim score TRACE.jsonl... --costs C.json|HARDWARE:SHAPE

`run` prints the simulation's result as JSON on stdout; `fit` writes a cost model fitted to
step traces (`engine serve --step-trace FILE`); `score` prints any cost model's error against
step traces (a roofline's, on the hardware it names). Errors are one line on stderr, exit 2.
"""

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from engine.cli import serve_options
from engine.config import ConfigError, resolve_config
from engine.model.load import load_model
from engine.sim.cost_file import load_costs
from engine.sim.costs import fit, read_bounded, score
from engine.sim.driver import simulate
from engine.sim.roofline import Roofline

MAX_TRACE_BYTES = 512 * 2**20  # a calibration's step traces are a few MB; a workload less


@click.group()
def main():
    """The engine's scheduler on a virtual clock (docs/simulation.md)."""


@main.command()
@click.option("--workload", "workload_path", required=True, type=click.Path(dir_okay=False))
@click.option("--costs", "costs_path", required=True, help="A file, or HARDWARE:SHAPE[:WEIGHTS].")
@click.option("--model", default="smollm2-135m", show_default=True)
@serve_options
def run(workload_path, costs_path, model, no_batch, no_prompt_cache, **flags):
    """Simulate a workload; print the result JSON."""
    flags = {k: v for k, v in flags.items() if k not in ("host", "port", "api_key")}
    if no_batch:
        flags["parallel"] = 1
    if no_prompt_cache:
        flags["prompt_cache"] = False
    try:
        config = resolve_config({**flags, "model": model}, os.environ)
        workload = json.loads(read_bounded(Path(workload_path), "workload", MAX_TRACE_BYTES))
    except (ConfigError, OSError, ValueError) as e:
        raise click.UsageError(str(e)) from None
    try:
        costs = load_costs(costs_path)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    loaded = load_model(model)
    if isinstance(costs, Roofline):  # the shape is the roofline's; the tokenizer the model's
        loaded = replace(loaded, args=costs.args)
    elif costs.model != model:
        raise click.UsageError(f"cost model {costs.name} prices {costs.model}, not {model}")
    result = simulate(loaded, config, costs, workload)
    result["config"] = config.public()
    result["model"] = costs.model
    json.dump(result, sys.stdout)


def _steps(traces) -> list[dict]:
    try:
        texts = [read_bounded(Path(t), "step trace", MAX_TRACE_BYTES) for t in traces]
    except ValueError as e:  # it names the file
        raise click.UsageError(str(e)) from None
    try:
        return [json.loads(line) for text in texts for line in text.splitlines() if line]
    except (OSError, ValueError) as e:
        raise click.UsageError(f"step trace: {e}") from None


@main.command("score")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--costs", "costs_path", required=True, help="A file, or HARDWARE:SHAPE[:WEIGHTS].")
def score_command(traces, costs_path):
    """Print a cost model's error per step family against measured step traces (JSON)."""
    try:
        costs = load_costs(costs_path)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    click.echo(json.dumps({"costs": costs.name, "families": score(costs, _steps(traces))}))


@main.command("fit")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False))
@click.option("--name", required=True)
@click.option("--source", required=True, help="Where the steps were measured (model, machine).")
@click.option("--model", required=True, help="The model the steps ran.")
def fit_command(traces, out, name, source, model):
    """Fit a cost model to step traces."""
    steps = _steps(traces)
    try:
        costs = fit(steps, name, source, model)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    costs.save(Path(out))
    click.echo(json.dumps(costs.fit))


if __name__ == "__main__":
    main()
