"""`harness publish`: a static site of the histories, one chart per suite x machine x metric
over commits, change points and A/B verdicts marked, each point linking to its result. Plain
HTML and inline SVG drawn here: nothing to fetch at view time, no script to fail."""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from markdown_it import MarkdownIt
from markupsafe import Markup

from harness.files import read_capped, write_atomic
from harness.history.points import Series
from harness.report.ab_report import slug, template_env
from harness.report.tables import fmt_value
from harness.results.errors import ComparisonError
from harness.results.store import MAX_INPUT_BYTES

WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 760, 240, 70, 20, 16, 28
VERDICT_COLOR = {"REGRESSION": "#c62828", "INVALID": "#6a1b9a", "INCONCLUSIVE": "#ef6c00",
                 "IMPROVEMENT": "#2e7d32", "PASS": "#2e7d32"}  # fmt: skip
PLAIN = "#1565c0"
# Every page says what it may load: its own inline styles and the plots beside it, no script,
# nothing remote. The templates escape what they show; this stops an escaping slip from running.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; "
    "form-action 'none'"
)


@dataclass(frozen=True, slots=True)
class Dot:
    x: float
    y: float
    color: str
    href: str
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    id: str
    title: str
    dots: list[Dot]
    path: str  # the polyline through the dots
    steps: list[dict]  # change points: x, label, worse
    ticks: list[dict]  # y-axis: y, label
    width: int = WIDTH
    height: int = HEIGHT


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or abs(hi) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def chart(s: Series, links: dict[str, str]) -> Chart:
    """The geometry of one series' chart (pure: tested without a browser)."""
    values = [p.value for p in s.points]
    lo, hi = min(values), max(values)
    lo, hi = lo - 0.05 * (hi - lo or lo), hi + 0.05 * (hi - lo or hi)
    n = len(s.points)
    x = _scale(0, max(n - 1, 1), PAD_L, WIDTH - PAD_R)
    y = _scale(lo, hi, HEIGHT - PAD_B, PAD_T)
    dots = []
    for i, p in enumerate(s.points):
        verdict = p.verdicts[-1] if p.verdicts else ""
        title = f"{p.sha[:10]} {p.date[:10]} {p.subject}: {fmt_value(s.metric, p.value)}"
        title += f" (median of {p.runs} run(s))" + (f", A/B {verdict}" if verdict else "")
        color = VERDICT_COLOR.get(verdict, PLAIN)
        dots.append(Dot(round(x(i), 1), round(y(p.value), 1), color, links[p.sources[0]], title))
    path = " ".join(f"{d.x},{d.y}" for d in dots)
    steps = [
        {
            "x": round((x(c.index - 1) + x(c.index)) / 2, 1),
            "label": f"{c.ratio:.3f}x at {s.points[c.index].sha[:8]}",
            "worse": s.worse(c),
        }
        for c in s.changes
    ]
    ticks = [
        {"y": round(y(v), 1), "label": fmt_value(s.metric, v)} for v in (lo, (lo + hi) / 2, hi)
    ]
    return Chart(slug(s.key), s.key, dots, path, steps, ticks)


MAX_PAGE_BYTES = 32 * 2**20  # a report is ~10 KB and a plot ~150 KB
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s/]+\.png)\)")


def _page(source: Path, target: Path, back: str, folder: Path) -> Path:
    """The result a point links to, placed under the site: its Markdown report as an HTML page
    (with the plots it shows), else the JSON itself. Each read goes through the one door, none
    outside `folder`: a report or plot that is a link out of it, or no regular file, is not
    published (the JSON stands in for such a report)."""
    report = source.with_suffix(".md")
    try:
        data = read_capped(report, MAX_PAGE_BYTES, "report", ComparisonError, within=folder)
        text = data.decode("utf-8")
    except (ComparisonError, UnicodeDecodeError):
        target = target.with_suffix(".json")
        write_atomic(target, read_json_bytes(source, folder))
        return target
    for png in IMAGE.findall(text):
        with contextlib.suppress(ComparisonError):
            plot = read_capped(source.parent / png, MAX_PAGE_BYTES, "plot", ComparisonError,
                               within=folder)  # fmt: skip
            write_atomic(target.parent / png, plot)
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    page = (
        template_env()
        .get_template("site-report.html.j2")
        # the one trusted markup on the site: markdown-it's own HTML (raw HTML off) of a report
        # the harness wrote, whose text from elsewhere its Markdown escaped
        .render(title=report.stem, body=Markup(body), back=back, csp=CSP)
    )
    target = target.with_suffix(".html")
    write_atomic(target, page)
    return target


def read_json_bytes(source: Path, folder: Path) -> bytes:
    """A result's own bytes, as history read them: bounded, and from inside `folder`."""
    return read_capped(source, MAX_INPUT_BYTES, "saved result", ComparisonError, within=folder)


def publish(all_series: list[Series], folder: Path, out: Path) -> Path:
    """Write out/index.html and each linked result under out/results/, so the site works from
    a file URL with no network."""
    out = Path(out)
    (out / "results").mkdir(parents=True, exist_ok=True)
    links = {}
    for source in sorted({src for s in all_series for p in s.points for src in p.sources}):
        target = out / "results" / source
        target.parent.mkdir(parents=True, exist_ok=True)
        back = "../" * (len(Path(source).parts)) + "index.html"
        page = _page(Path(folder) / source, target, back, Path(folder)).relative_to(out)
        links[source] = urllib.parse.quote(page.as_posix())  # a file name is no URL
    charts = [chart(s, links) for s in all_series]
    html = (
        template_env()
        .get_template("site.html.j2")
        .render(
            charts=charts,
            series=all_series,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            fmt_value=fmt_value,
            csp=CSP,
        )
    )
    index = out / "index.html"
    write_atomic(index, html)
    return index
