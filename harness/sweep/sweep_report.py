"""The sweep report: the result as plain JSON, a dated Markdown file rendered from
templates/sweep.md.j2 beside it, the three sweep plots, and the terminal summary."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.table import Table

from harness import escape
from harness.files import write_atomic
from harness.names import release
from harness.report.ab_report import slug, template_env, unique_stem, write_result
from harness.report.plots import plot_capacity
from harness.report.summary import reproduce, sweep_shas
from harness.report.tables import fmt_interval, fmt_ratio, fmt_value, machine_lines
from harness.results import store
from harness.results.store import schema
from harness.results.sweep_result import Judgement, LevelRound, SweepResult
from harness.results.verdicts import exit_meaning
from harness.runs.plan import ArmPlan
from harness.sim.simulated_run import described
from harness.sweep.plots import plot_latency_throughput, plot_throughput, plot_ttft
from harness.sweep.sweep import Sweep, SweepRuns, describe

TABLE_METRICS = (
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_ms",
    "itl_p50_ms",
    "tok_s",
    "req_s",
    "errors",
    "peak_rss_bytes",
    "peak_device_bytes",
)
EXIT_MEANING_ONE = {0: "every run was valid", 2: "a run was invalid or the server crashed"}


def sweep_result(
    plan: Sweep,
    plans: dict[str, ArmPlan],
    rounds: int,
    raw: SweepRuns,
    by_level: dict[str, list[LevelRound]],
    judgement: Judgement,
    command: str,
) -> SweepResult:
    """Everything the report shows (saved as the JSON beside the report). The runs keep their
    requests but drop the RSS timeline (the sweep's memory is per level)."""
    runs = [replace(r, run=replace(r.run, timeline=None) if r.run else None) for r in raw.runs]
    sims = [r.run.simulated for r in runs if r.run and r.run.simulated]
    gate: dict[str, float | None] = dict(plan.suite.gate)
    return SweepResult(
        schema=schema("sweep"),
        simulated=described(sims[0]) if sims else None,
        suite=plan.suite.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        command=command,
        mode=plan.mode,
        levels=plan.levels,
        names=plan.names(),
        requests={plan.phase(v).name: plan.phase(v).requests for v in plan.levels},
        phase={k: str(v) for k, v in vars_of(plan.phase(plan.levels[0])).items()},
        cold=plan.cold,
        capacity_plan=describe(plan.capacity) if plan.capacity else None,
        rounds=rounds,
        arms={name: p.desc for name, p in plans.items()},
        gate=gate,
        memory_slack_bytes=plan.suite.memory_slack_bytes,
        judgement=judgement,
        by_level=by_level,
        runs=runs,
        crash=raw.crash,
        budget_ended=raw.budget_ended,
    )


def vars_of(phase) -> dict:
    keep = ("prompt_tokens", "max_tokens", "endpoint", "ignore_eos", "temperature", "prefix_tokens")
    out = {k: getattr(phase, k) for k in keep}
    length = phase.prompt_tokens
    out["prompt_tokens"] = length.value if length.dist == "exact" else length
    return out


def report_stem(result: SweepResult) -> str:
    who = [slug(a.label) for a in (result.arms or {}).values()]
    created = slug(str(result.created)[:10])
    return "-".join([created, "sweep", slug(result.suite), "-vs-".join(who)])


def headline(result: SweepResult) -> str:
    j = result.judgement
    code = j.exit_code
    two = "base" in (result.arms or {})
    meaning = exit_meaning(code, bool(result.simulated)) if two else EXIT_MEANING_ONE[code]
    line = f"# {j.verdict}: exit {code} ({meaning})"
    if j.first_regression:
        worse = ", ".join(j.first_regression_metrics or [])
        line += f"; head first regresses at {j.first_regression} ({worse})"
    if "base" in j.knee:
        b, h = _level(j.knee["base"]), _level(j.knee["head"])
        line += f"; knee moved {b} -> {h}" if j.knee_moved else f"; knee unchanged at {b}"
    return line


def _level(v: float | None) -> str:
    return "none (still growing)" if v is None else f"{v:g}"


def _goodput(v: float | None) -> str:
    return "none (the lowest level misses an SLO)" if v is None else f"{v:g}"


def capacity_rows(result: SweepResult) -> list[dict]:
    """Per arm: the median capacity and each round's bracket (met level, lowest missed)."""
    arms = result.arms or {}
    rows = []
    for arm, found in (result.judgement.capacity or {}).items():
        brackets = [f"[{_bound(f.met_level)}, {_bound(f.missed_level)}]" for f in found.runs]
        rows.append(
            {
                "arm": arm,
                "label": arms[arm].label,
                "req_s": fmt_value("capacity_req_s", found.capacity_req_s),
                "brackets": ", ".join(brackets) or "no search",
            }
        )
    return rows


def _bound(level: float | None) -> str:
    return "-" if level is None else f"{level:g}"


def curve_rows(result: SweepResult) -> list[dict]:
    rows = []
    j = result.judgement
    for arm, curve in j.curves.items():
        met = j.slo_met.get(arm) or []
        for i, c in enumerate(curve):
            rows.append(
                {
                    "arm": arm,
                    "level": c.name,
                    "rounds": c.rounds,
                    "values": [fmt_value(m, c.median(m)) for m in TABLE_METRICS],
                    "slo": "" if not met else ("yes" if met[i] else "no"),
                    "valid": "yes" if c.valid else "no",
                }
            )
    return rows


def verdict_rows(result: SweepResult) -> list[dict]:
    rows = []
    for name, comp in (result.judgement.levels or {}).items():
        for m in comp.metrics:
            rows.append(
                {
                    "level": name,
                    "metric": m.name,
                    "base": fmt_value(m.name, m.base_value),
                    "head": fmt_value(m.name, m.head_value),
                    "ratio": fmt_ratio(m.ratio),
                    "ci": fmt_interval(m),
                    "tol": f"{m.tolerance:.0%}",
                    "verdict": str(m.verdict),
                }
            )
        if not comp.metrics:
            rows.append(
                {
                    "level": name,
                    "metric": "-",
                    "base": "",
                    "head": "",
                    "ratio": "",
                    "ci": "",
                    "tol": "",
                    "verdict": comp.verdict,
                }
            )
    return rows


def counter_rows(result: SweepResult) -> list[dict]:
    """Per arm and series, the median delta at each level; series that stay 0 are left out."""
    rows = []
    for arm, curve in result.judgement.curves.items():
        for series in sorted({s for c in curve for s in c.counters}):
            values = [c.counters.get(series) for c in curve]
            if any(values):
                cells = ["-" if v is None else f"{v:g}" for v in values]
                rows.append({"arm": arm, "series": series, "values": cells})
    return rows


def render_markdown(result: SweepResult, plots: dict[str, str | None]) -> str:
    env = template_env()
    runs = [r.run for r in result.runs if r.run]
    return env.get_template("sweep.md.j2").render(
        r=result,
        j=result.judgement,
        headline=headline(result),
        reproduce_line=reproduce(result.command or "", sweep_shas(result)),
        plots=plots,
        metrics=TABLE_METRICS,
        curve_rows=curve_rows(result),
        verdict_rows=verdict_rows(result),
        counter_rows=counter_rows(result),
        capacity_rows=capacity_rows(result),
        machine=machine_lines(runs[0].machine if runs else None),
        level=_level,
        goodput=_goodput,
    )


def write_sweep_report(result: SweepResult, out_dir: Path, rerender: bool = False) -> Path:
    """Write <stem>.json (slim) and .raw.json.gz, <stem>.md and
    <stem>-{throughput,ttft,latency}.png; return the .md."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = unique_stem(out_dir, report_stem(result), str(result.created), rerender)
    try:
        write_result(result.to_json(), out_dir, stem)  # the data first
    finally:
        release(out_dir / f"{stem}.json")  # the name claimed, if it was never written
    draw = {"throughput": plot_throughput, "ttft": plot_ttft, "latency": plot_latency_throughput}
    plots: dict[str, str | None] = {}
    for kind, plot in draw.items():
        try:  # a curve with nothing to draw (no level ran) leaves its plot out, not the report
            plot(result, out_dir / f"{stem}-{kind}.png")
            plots[kind] = f"{stem}-{kind}.png"
        except ValueError:
            plots[kind] = None
    labels = {a: d.label for a, d in (result.arms or {}).items()}
    runs_of = {a: [r.run for r in result.runs if r.arm == a and r.run] for a in labels}
    if plot_capacity(runs_of, labels, out_dir / f"{stem}-capacity.png"):
        plots["capacity"] = f"{stem}-capacity.png"
    md = out_dir / f"{stem}.md"
    write_atomic(md, render_markdown(result, plots))
    return md


def print_sweep(console: Console, result: SweepResult) -> None:
    j = result.judgement
    arms = (result.arms or {}).values()
    said = f"suite {result.suite}: " + " vs ".join(a.label for a in arms)
    table = Table(title=markup_escape(escape.terminal(said)))  # names: printed as they are
    for col in ("level", "arm", "TTFT p95", "tok/s", "req/s", "errors", "verdict"):
        table.add_column(col, justify="left" if col in ("level", "arm", "verdict") else "right")
    for i, name in enumerate(result.names or []):
        comp = (j.levels or {}).get(name)
        for arm, curve in j.curves.items():
            c = curve[i]
            table.add_row(
                name,
                arm,
                *(fmt_value(m, c.median(m)) for m in ("ttft_p95_ms", "tok_s", "req_s", "errors")),
                comp.verdict if comp and arm == "head" else "",
            )
    console.print(table)
    for arm in j.curves:
        good = f", goodput {_goodput(j.goodput[arm])}" if j.slos else ""
        console.print(f"{arm}: knee {_level(j.knee[arm])}{good}", highlight=False)
    for row in capacity_rows(result):
        line = f"{row['arm']}: capacity {row['req_s']}, levels [met, missed] {row['brackets']}"
        console.print(line, highlight=False, markup=False)
    if result.budget_ended:
        console.print(f"- {result.budget_ended}", highlight=False, markup=False)
    for line in j.invalid:
        console.print(f"- invalid: {escape.terminal(line)}", highlight=False, markup=False)
    if crash := result.crash:
        console.print(
            f"{crash.arm} in round {crash.round}: {escape.terminal(crash.message)}\n"
            "server log tail:\n" + escape.terminal(crash.log_tail or "(empty)", multiline=True),
            highlight=False,
            markup=False,
        )
    if sim := result.simulated:
        said = escape.terminal(f"simulated with {sim.name} ({sim.source})")
        console.print(said, highlight=False, markup=False)
    console.print(headline(result).lstrip("# "), highlight=False, soft_wrap=True)  # one line


def rerender_sweep_report(json_path: Path, out_dir: Path | None = None) -> Path:
    """Render the report and plots again from a saved sweep JSON."""
    json_path = Path(json_path)
    result = SweepResult.from_json(store.load(json_path))
    out_dir = out_dir if out_dir is not None else json_path.parent
    return write_sweep_report(result, out_dir, rerender=True)
