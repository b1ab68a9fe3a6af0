"""The A/B report: a dated Markdown file in results/ with the full result as JSON beside it and
PNG plots, rendered from templates/report.md.j2; re-renderable from the saved JSON."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from harness import escape
from harness.files import shipped_dir, strict_json, write_atomic
from harness.names import claim_file, release
from harness.report import tables
from harness.report.engagement import engagement
from harness.report.headline import headline
from harness.report.plots import (
    arm_runs,
    plot_capacity,
    plot_rss,
    plot_ttft,
    plot_windows,
)
from harness.report.summary import arm_shas, reproduce
from harness.results import store
from harness.results.ab_result import ABResult
from harness.results.comparison import Comparison
from harness.results.errors import ComparisonError
from harness.results.saved import is_run, load_result

TEMPLATES = shipped_dir("templates")


def slug(name: str, limit: int = 80) -> str:
    """A name made safe for a file path: runs of other characters become one '-'. One longer
    than `limit` keeps its start and gains a hash of the whole, so two names never meet."""
    safe = re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-.") or "unnamed"
    if len(safe) <= limit:
        return safe
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{safe[: limit - 9].strip('-.')}-{digest}"


def report_stem(ab: ABResult) -> str:
    """YYYY-MM-DD-<suite>-<base>-vs-<head>, from the result's own creation date."""
    who = [slug(ab.created[:10]), slug(ab.suite), slug(ab.base.label), "vs", slug(ab.head.label)]
    return "-".join(who)


def _plain(obj: object) -> object:
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot store {type(obj).__name__} in the report JSON")


def to_plain(ab_result: dict) -> dict:
    """The result as plain JSON data: exactly what is saved, so a re-render sees the same input."""
    return json.loads(json.dumps(ab_result, default=_plain))


def _said(value: object) -> object:
    return "n/a" if value is None else value  # as `finalize` says a bare None


def _html(name: str | None) -> bool:
    return name is not None and name.endswith((".html", ".html.j2"))


def template_env() -> Environment:
    """The templates' environment: HTML templates (the site) escape every value unless it is
    marked safe; the Markdown ones (A/B, sweep, bisect reports) escape text the harness did not
    write through their filters: `md` (or `cell`) for prose and table cells, `code` for an
    inline code span (`tcode` inside a table), `fence` for a block of lines (a log tail)."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=_html,
        undefined=StrictUndefined,
        finalize=lambda value: "n/a" if value is None else value,  # never a Python `None`
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = env.filters["cell"] = lambda value: escape.markdown(_said(value))
    env.filters["code"] = lambda value: escape.code_span(_said(value))
    env.filters["tcode"] = lambda value: escape.code_span(_said(value), table=True)
    env.filters["fence"] = lambda value, info="": escape.fence(_said(value), info)
    return env


def render_markdown(result: ABResult, plots: dict[str, str], no_plots: str = "") -> str:
    """Markdown for an A/B result; `plots` maps 'rss'/'ttft'/... to file names beside it."""
    env = template_env()
    comparison, rounds = result.comparison, result.rounds
    said = headline(comparison)
    arms, arm_warnings = tables.arm_sections(result)
    counter_arms, counter_rows, counter_folded = engagement(arm_runs(rounds))
    machine, load, machine_warnings = tables.machine_and_load(rounds)
    load |= tables.sampler_and_prompts(rounds)
    return env.get_template("report.md.j2").render(
        ab=result,
        comparison=comparison,
        verdict_line=tables.verdict_line(said),
        metric_rows=tables.metric_rows(comparison),
        moved_rows=tables.moved_rows(comparison),
        startup_rows=tables.startup_rows(result),
        power_rows=tables.power_rows(comparison),
        walls=tables.round_walls(rounds),
        looks=_looks(comparison),
        has_null=bool(comparison.noise),
        key_metrics=tables.KEY_METRICS,
        round_rows=tables.round_rows(rounds),
        memory_sources=tables.memory_sources(rounds),
        reproduce_line=reproduce(result.command or "", arm_shas(result)),
        plots=plots,
        no_plots=no_plots or "Not drawn: no run completed.",
        arms=arms,
        counter_arms=counter_arms,
        counter_rows=counter_rows,
        counter_folded=counter_folded,
        machine=machine,
        load=load,
        warnings=said.warnings
        + [f"invalid: {line}" for line in said.invalid]
        + arm_warnings
        + machine_warnings,
    )


def _looks(comparison: Comparison) -> str:
    planned = comparison.schedule.looks if comparison.schedule else []
    looks = ", ".join(str(r) for r in planned) or "one, at the end"
    return f"{looks} rounds (stopped after {comparison.rounds})"


RAW_KEYS = ("timeline", "requests", "warmup_requests")  # the bulk of a run: raw file only
# (and server.health, whose fields the run already lifts into server)


def slim(doc: Any) -> Any:
    """`doc` without per-request records and RSS timelines: every run in it (a dict with a
    summary and a fingerprint, however deep) keeps the rest and a request_count."""
    if isinstance(doc, list):
        return [slim(x) for x in doc]
    if not isinstance(doc, dict):
        return doc
    if is_run(doc):
        count = doc.get("request_count", len(doc.get("requests") or []))
        kept = {k: v for k, v in doc.items() if k not in RAW_KEYS}
        if isinstance(kept.get("server"), dict):  # its fields are lifted from health already
            kept["server"] = {k: v for k, v in kept["server"].items() if k != "health"}
        return kept | {"request_count": count}
    return {k: slim(v) for k, v in doc.items()}


def write_result(doc: dict, out_dir: Path, stem: str) -> bool:
    """<stem>.raw.json.gz with everything (when the runs still hold raw data), then
    <stem>.json, slim, naming it in `raw`: tens of KB a repository can keep. True if raw."""
    raw = has_raw(doc)
    if raw:
        body = gzip.compress(strict_json(doc).encode(), 6)
        write_atomic(out_dir / f"{stem}.raw.json.gz", body)
        doc = slim(doc) | {"raw": f"{stem}.raw.json.gz"}
    store.save(doc, out_dir / f"{stem}.json", separators=(",", ":"))
    return raw


def write_report(ab: ABResult, out_dir: Path, rerender: bool = False) -> Path:
    """Write <stem>.md, <stem>.json (slim), <stem>.raw.json.gz (everything) and the plots
    <stem>-rss.png / -ttft.png under out_dir; return the .md. A result read back without its
    raw file (a slim JSON alone) is rendered without plots."""
    doc = to_plain(ab.to_json())
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = unique_stem(out_dir, report_stem(ab), ab.created, rerender)
    try:
        raw = write_result(doc, out_dir, stem)  # the data first, as it came
    finally:
        release(out_dir / f"{stem}.json")  # the name claimed, if it was never written
    labels = {"base": ab.base.label, "head": ab.head.label, "null": "base again"}
    runs_of = arm_runs(ab.rounds)
    plots = {}
    if raw and runs_of:  # an arm that crashed before any run: nothing to plot
        plots = {"ttft": f"{stem}-ttft.png"}
        if not ab.simulated:  # a simulation has no RSS timeline to draw
            plots["rss"] = f"{stem}-rss.png"
            plot_rss(runs_of, labels, out_dir / plots["rss"])
        plot_ttft(runs_of, labels, out_dir / plots["ttft"])
        if plot_windows(runs_of, labels, out_dir / f"{stem}-time.png"):
            plots["time"] = f"{stem}-time.png"
        if plot_capacity(runs_of, labels, out_dir / f"{stem}-capacity.png"):
            plots["capacity"] = f"{stem}-capacity.png"
    md = out_dir / f"{stem}.md"
    why = ""
    if not raw and runs_of:
        why = f"Not drawn: the raw data ({ab.raw or 'raw file'}) is not here."
    write_atomic(md, render_markdown(ab, plots, why))
    return md


def has_raw(doc: object) -> bool:
    """Whether any run in `doc` still holds its timeline or requests (not read from a slim
    JSON)."""
    if isinstance(doc, list):
        return any(has_raw(x) for x in doc)
    if not isinstance(doc, dict):
        return False
    if is_run(doc):
        return any(doc.get(k) for k in RAW_KEYS)  # a slim run's record holds them empty
    return any(has_raw(v) for v in doc.values())


REPORT_FILES = (".json", ".md", ".raw.json.gz", "-rss.png", "-ttft.png")


def unique_stem(out_dir: Path, stem: str, created: str, rerender: bool = False) -> str:
    """`stem`, or with the result's time appended (then -2, -3, ...) when that name is taken
    (two same-day runs of the same arms, or two in the same second): its <stem>.json is claimed
    exclusively, so a report is never overwritten by another. A re-render (`rerender`) of the
    result a name already holds (the same `created`) keeps that name."""
    existing = out_dir / f"{stem}.json"
    if rerender and existing.exists():
        try:
            if store.read_json(existing).get("created") == created:
                return stem
        except (ComparisonError, AttributeError):
            pass
    timed = f"{stem}-{slug(created[11:19].replace(':', ''))}" if created[11:19] else stem
    beside = (".md",) if rerender else REPORT_FILES  # a re-render's raw file may lie there
    return claim_file(out_dir, [stem, timed], ".json", beside).name[: -len(".json")]


def rerender_report(json_path: Path, out_dir: Path | None = None) -> Path:
    """`harness report RESULT.json`: render the report again from a saved result."""
    json_path = Path(json_path)
    out_dir = out_dir if out_dir is not None else json_path.parent
    return write_report(ABResult.from_json(load_result(json_path)), out_dir, rerender=True)
