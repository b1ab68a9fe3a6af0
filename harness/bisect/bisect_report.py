"""The bisect report: the search as its record (what is saved as JSON), its path table, and a
dated Markdown file in results/ from templates/bisect.md.j2; the culprit's A/B against its
parent is written beside it as an ordinary A/B report (report/ab_report.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from harness.bisect.bisector import BisectOutcome, Step
from harness.bisect.commits import Commit
from harness.files import write_atomic
from harness.names import claim_file
from harness.report import tables
from harness.report.ab_report import slug, template_env, write_report
from harness.report.summary import bisect_shas, reproduce
from harness.results import bisect_result as saved
from harness.results import store
from harness.results.bisect_result import BisectResult


def _commit(c: Commit) -> saved.Commit:
    return saved.Commit(sha=c.sha, short=c.short, subject=c.subject, merge=c.merge)


def step_row(step: Step, metrics: list[str]) -> saved.Step:
    """One line of the path: the commit, each followed metric's ratio and CI, the mark."""
    comp = step.comparison
    by_name = {m.name: m for m in comp.metrics} if comp else {}
    shown = [by_name[n] for n in metrics if n in by_name]
    return saved.Step(
        role=step.role,
        base=_commit(step.base),
        head=_commit(step.head),
        rounds=comp.rounds if comp else 0,
        ratio="; ".join(f"{m.name} {tables.fmt_ratio(m.ratio)}" for m in shown) or "n/a",
        ci="; ".join(tables.fmt_ci(m.ci_low, m.ci_high) for m in shown) or "n/a",
        verdict="; ".join(str(m.verdict) for m in shown) or "n/a",
        mark=str(step.mark) if step.mark else "n/a",
        reason=step.reason,
        wall_s=round(step.wall_s, 1),
    )


def summary(outcome: BisectOutcome, suite: str, good: Commit, command: str) -> BisectResult:
    """The bisect as its record (each step's comparison, not its raw runs)."""
    marks = {s.head.sha: str(s.mark) for s in outcome.steps if s.role == "step" and s.mark}
    marks[outcome.commits[-1].sha] = "bad"
    rows = [step_row(s, outcome.metrics) for s in outcome.steps]
    return BisectResult(
        schema=store.schema("bisect"),
        suite=suite,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        good=_commit(good),
        bad=_commit(outcome.commits[-1]),
        metrics=outcome.metrics,
        commits=[replace(_commit(c), mark=marks.get(c.sha, "")) for c in outcome.commits],
        path=rows,
        comparisons=[s.comparison for s in outcome.steps],
        culprit=_commit(outcome.culprit) if outcome.culprit else None,
        suspects=[_commit(c) for c in outcome.suspects],
        budget_ended=outcome.budget_ended,
        skipped=[row for row in rows if row.mark == "skip"],
        unresolved=[row for row in rows if row.mark == "unresolved"],
        final=step_row(outcome.final, outcome.metrics) if outcome.final else None,
        command=command,
    )


def headline(result: BisectResult) -> str:
    if result.interrupted:
        return f"interrupted after {len(result.path)} A/B(s): no first bad commit named yet"
    if result.culprit:
        return f"first bad commit: {result.culprit.sha} {result.culprit.subject}"
    shas = ", ".join(c.short for c in result.suspects)
    if result.budget_ended:
        return f"{result.budget_ended}: the first bad commit is one of {shas}"
    return f"no single first bad commit: it is one of {shas} (skipped or unresolved between)"


def write_bisect_report(result: BisectResult, final: Step | None, out_dir: Path) -> Path:
    """<date>-bisect-<suite>-<good>-<bad>.md and .json, plus the final A/B's own report."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final_rows = []
    if final is not None and final.result is not None and final.comparison is not None:
        result = replace(result, final_report=write_report(final.result, out_dir).name)
        final_rows = tables.metric_rows(final.comparison)
    ends = [c.short[:8] if c else "unknown" for c in (result.good, result.bad)]
    stem = "-".join([slug(str(result.created)[:10]), "bisect", slug(result.suite), *ends])
    stem = claim_file(out_dir, [stem], ".json", (".md",)).stem  # never another bisect's
    store.save(result.to_json(), out_dir / f"{stem}.json", indent=1)
    md = out_dir / f"{stem}.md"
    page = template_env().get_template("bisect.md.j2")
    line = reproduce(result.command or "", bisect_shas(result))
    said = page.render(b=result, headline=headline(result), final=final_rows, reproduce_line=line)
    write_atomic(md, said)
    return md
