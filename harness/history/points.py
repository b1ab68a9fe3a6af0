"""A folder of saved results as histories over commits: one series per suite x machine x
metric, one point per commit (the median of every run that served it), in commit-date order,
with the change points stats/changepoint.py finds in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from harness.results import metrics, store
from harness.results.ab_result import ABResult, Arm
from harness.results.checked import is_ab
from harness.results.errors import ComparisonError
from harness.results.run import Run, RunArm, RunFile
from harness.stats.changepoint import ChangePoint, change_points


@dataclass(frozen=True, slots=True)
class Sample:
    """One run's value of one metric, and the commit it served."""

    suite: str
    machine: str
    metric: str
    sha: str
    date: str
    subject: str
    depth: int  # commits on its first-parent chain (0: unknown)
    value: float
    source: str  # the result file, relative to the history folder
    verdict: str | None = None  # the A/B verdict when the run was an A/B's head


@dataclass(slots=True)
class Point:
    sha: str
    date: str
    subject: str
    depth: int
    value: float  # median over its runs
    runs: int
    sources: list[str]
    verdicts: list[str]


@dataclass(slots=True)
class Series:
    suite: str
    machine: str
    metric: str
    points: list[Point]
    changes: list[ChangePoint] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.suite} | {self.machine} | {self.metric}"

    def worse(self, change: ChangePoint) -> bool:
        return (change.ratio > 1) == metrics.metric(self.metric).lower_is_better


def _commit(arm: Arm | RunArm | None) -> tuple[str, str, str, int] | None:
    """(sha, date, subject, depth) of an arm that served a commit; None for a command or URL
    arm, or a dirty working tree: only commits belong in a history."""
    if arm is None or not arm.commit or arm.dirty:
        return None
    return arm.commit, arm.date or "", arm.subject or "", arm.depth or 0


def _machine(run: Run) -> str:
    m = run.machine
    if m is None:
        return "unknown machine"
    return f"{m.cpu_model or '?'} x{'?' if m.logical_cores is None else m.logical_cores}"


def _samples_of_runs(
    runs: list[Run | None],
    commit: tuple[str, str, str, int] | None,
    gate: list[str],
    suite: str,
    source: str,
    verdict: str | None,
):
    if commit is None:
        return
    sha, date, subject, depth = commit
    for run in runs:
        if run is None or not run.valid:
            continue
        own = list(run.suite.gate or {}) if run.suite else []
        for metric in gate or own:
            value = run.summary.get(metric)
            if value is not None and value > 0:
                name = suite or (run.suite.name if run.suite else "?")
                yield Sample(name, _machine(run), metric, sha, date, subject, depth,
                             float(value), source, verdict)  # fmt: skip


def samples(doc: dict, source: str) -> list[Sample]:
    """The samples in one saved result: a `harness run` JSON (its arm), or an A/B result (each
    arm's runs under its own commit; head's carry the A/B's verdict)."""
    if is_ab(doc):
        result = ABResult.from_json(doc)
        gate = list(result.gate or {}) or [m.name for m in result.comparison.metrics]
        out = []
        for arm, verdict in (("base", None), ("head", result.comparison.verdict)):
            desc = result.base if arm == "base" else result.head
            runs = [r.base if arm == "base" else r.head for r in result.rounds]
            out += _samples_of_runs(runs, _commit(desc), gate, result.suite, source, verdict)
        return out
    if isinstance(doc.get("runs"), list) and isinstance(doc.get("arm"), dict):
        file = RunFile.from_json(doc)
        runs = [Run.from_json(r) for r in file.runs if "summary" in r]
        return list(_samples_of_runs(runs, _commit(file.arm), [], "", source, None))
    return []


def collect(folder: Path, exclude: Path | None = None) -> tuple[list[Sample], list[str]]:
    """Every sample in the JSON files under `folder` (none under `exclude`: a site published
    inside it), and one line per file skipped (not a result, damaged, or a link out of it)."""
    folder = Path(folder)
    found, skipped = [], []
    for path in sorted(folder.rglob("*.json")):
        rel = str(path.relative_to(folder))
        if "/logs/" in f"/{rel}" or (exclude and path.resolve().is_relative_to(exclude.resolve())):
            continue
        try:
            doc = store.load(path, within=folder)
            if isinstance(doc, dict):
                found += samples(doc, rel)
        except ComparisonError as exc:
            why = str(exc).replace(f"saved result {path}", "").replace(str(path), "")
            skipped.append(f"{rel}: {why.lstrip(': ')}")
    return found, skipped


def _sources(runs: list[Sample]) -> list[str]:
    """The files a point came from, an A/B's first: its report is what a reader wants."""
    return sorted({r.source for r in runs}, key=lambda src: (
        not any(r.verdict for r in runs if r.source == src), src))  # fmt: skip


def series(found: list[Sample], seed: int = 0) -> list[Series]:
    """Samples grouped by suite x machine x metric, one point per commit in date order, each
    series with its change points."""
    groups: dict[tuple[str, str, str], dict[str, list[Sample]]] = {}
    for s in found:
        groups.setdefault((s.suite, s.machine, s.metric), {}).setdefault(s.sha, []).append(s)
    out = []
    for (suite, machine, metric), by_sha in sorted(groups.items()):
        points = [
            Point(sha, runs[0].date, runs[0].subject, runs[0].depth,
                  median(r.value for r in runs), len(runs),
                  _sources(runs), sorted({r.verdict for r in runs if r.verdict}))
            for sha, runs in by_sha.items()
        ]  # fmt: skip
        points.sort(key=lambda p: (p.depth, p.date, p.sha))
        found_changes = change_points([p.value for p in points], seed=seed)
        out.append(Series(suite, machine, metric, points, found_changes))
    return out
