"""The A/B report: a dated Markdown file in results/ with the full result as JSON beside it and
PNG plots, rendered from templates/report.md.j2; re-renderable from the saved JSON."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from harness.files import shipped_dir, write_atomic
from harness.report import tables
from harness.report.engagement import engagement
from harness.report.plots import arms_present, plot_rss, plot_ttft
from harness.report.saved import load_result
from harness.stats.power import power_rows, round_walls

TEMPLATES = shipped_dir("templates")


def slug(name: str, limit: int = 80) -> str:
    """A name made safe for a file path: runs of other characters become one '-'. One longer
    than `limit` keeps its start and gains a hash of the whole, so two names never meet."""
    safe = re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-.") or "unnamed"
    if len(safe) <= limit:
        return safe
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{safe[: limit - 9].strip('-.')}-{digest}"


def report_stem(ab: dict) -> str:
    """YYYY-MM-DD-<suite>-<base>-vs-<head>, from the result's own creation date."""
    return "-".join(
        [
            slug(str(ab["created"])[:10]),
            slug(ab["suite"]),
            slug(ab["base"]["label"]),
            "vs",
            slug(ab["head"]["label"]),
        ]
    )


def _plain(obj: object) -> object:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
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


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def template_env() -> Environment:
    """The report templates' environment (A/B, sweep, bisect), with the table-cell filter."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = _cell
    return env


def render_markdown(ab: dict, plots: dict[str, str], no_plots: str = "") -> str:
    """Markdown for a plain A/B result; `plots` maps 'rss'/'ttft' to file names beside it."""
    env = template_env()
    comparison = ab["comparison"]
    arms, arm_warnings = tables.arm_sections(ab)
    counter_arms, counter_rows, counter_folded = engagement(ab["rounds"])
    machine, load, machine_warnings = tables.machine_and_load(ab)
    load |= tables.sampler_and_prompts(ab)
    return env.get_template("report.md.j2").render(
        ab=ab,
        comparison=comparison,
        verdict_line=tables.verdict_line(comparison),
        metric_rows=tables.metric_rows(comparison),
        power_rows=power_rows(comparison),
        walls=round_walls(ab["rounds"]),
        looks=_looks(comparison),
        has_null=bool(comparison.get("noise")),
        key_metrics=tables.KEY_METRICS,
        round_rows=tables.round_rows(ab["rounds"]),
        plots=plots,
        no_plots=no_plots or "None: no run completed.",
        arms=arms,
        counter_arms=counter_arms,
        counter_rows=counter_rows,
        counter_folded=counter_folded,
        machine=machine,
        load=load,
        warnings=comparison["warnings"]
        + [f"invalid: {line}" for line in comparison["invalid"]]
        + arm_warnings
        + machine_warnings,
    )


def _looks(comparison: dict) -> str:
    schedule = comparison.get("schedule") or {}
    looks = ", ".join(str(r) for r in schedule.get("looks", [])) or "one, at the end"
    return f"{looks} rounds (stopped after {comparison['rounds']})"


RAW_KEYS = ("timeline", "requests", "warmup_requests")  # the bulk of a run: raw file only


def slim(ab: dict, raw_name: str) -> dict:
    """The result without per-request records and RSS timelines (tens of KB, for a repository);
    those stay in the compressed raw file named in `raw`, which `harness report` reads."""
    rounds = [
        {k: _slim_run(v) if isinstance(v, dict) and "summary" in v else v for k, v in r.items()}
        for r in ab["rounds"]
    ]
    return ab | {"rounds": rounds, "raw": raw_name}


def _slim_run(run: dict) -> dict:
    kept = {k: v for k, v in run.items() if k not in RAW_KEYS}
    return kept | {"request_count": run.get("request_count", len(run.get("requests", [])))}


def write_report(ab_result: dict, out_dir: Path) -> Path:
    """Write <stem>.md, <stem>.json (slim), <stem>.raw.json.gz (everything) and the plots
    <stem>-rss.png / -ttft.png under out_dir; return the .md. A result read back without its
    raw file (a slim JSON alone) is rendered without plots."""
    ab = to_plain(ab_result)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = unique_stem(out_dir, report_stem(ab), ab["created"])
    raw = has_raw(ab["rounds"])
    if raw:  # the data first
        write_atomic(out_dir / f"{stem}.raw.json.gz", gzip.compress(json.dumps(ab).encode(), 6))
    data = slim(ab, f"{stem}.raw.json.gz") if raw else ab
    write_atomic(out_dir / f"{stem}.json", json.dumps(data, indent=1) + "\n")
    labels = {"base": ab["base"]["label"], "head": ab["head"]["label"], "null": "base again"}
    plots = {}
    if raw and arms_present(ab["rounds"]):  # an arm that crashed before any run: nothing to plot
        plots = {"rss": f"{stem}-rss.png", "ttft": f"{stem}-ttft.png"}
        plot_rss(ab["rounds"], labels, out_dir / plots["rss"])
        plot_ttft(ab["rounds"], labels, out_dir / plots["ttft"])
    md = out_dir / f"{stem}.md"
    why = ""
    if not raw and arms_present(ab["rounds"]):
        why = f"Not drawn: the raw data ({ab.get('raw') or 'raw file'}) is not here."
    write_atomic(md, render_markdown(ab, plots, why))
    return md


def has_raw(rounds: list[dict]) -> bool:
    """Whether the runs still hold their timelines and requests (not read from a slim JSON)."""
    runs = [r[a] for r in rounds for a in ("base", "head", "null") if isinstance(r.get(a), dict)]
    return any("timeline" in run or "requests" in run for run in runs)


def unique_stem(out_dir: Path, stem: str, created: str) -> str:
    """`stem`, or with the result's time appended when another result already has that name
    (two same-day runs of the same arms): a report is never overwritten by a different one."""
    existing = out_dir / f"{stem}.json"
    if not existing.exists():
        return stem
    try:
        same = json.loads(existing.read_text()).get("created") == created
    except (OSError, ValueError, AttributeError):
        same = False
    return stem if same else f"{stem}-{slug(created[11:19].replace(':', ''))}"


def rerender_report(json_path: Path, out_dir: Path | None = None) -> Path:
    """`harness report RESULT.json`: render the report again from a saved result."""
    json_path = Path(json_path)
    out_dir = out_dir if out_dir is not None else json_path.parent
    return write_report(load_result(json_path), out_dir)
