"""A folder of saved results as histories over commits: one series per suite x machine x
metric, one point per commit (the median of every run that served it), in commit-date order,
with the change points stats/changepoint.py finds in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from harness.report.merge import machine_name
from harness.results import metrics, store
from harness.results.errors import ComparisonError
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


def _gated(names: object) -> list[str]:
    return [n for n in names or {} if isinstance(n, str)]


def _samples_of_runs(runs: list, arm: dict, gate: list[str], suite: str, source: str, verdict):
    if not (arm or {}).get("commit") or (arm or {}).get("dirty"):
        return  # only commits belong in a history: a dirty working tree is no commit
    for run in runs:
        if not isinstance(run, dict) or not run.get("valid"):
            continue
        machine = machine_name({"rounds": [{"base": run}]})
        for metric in gate or _gated((run.get("suite") or {}).get("gate")):
            value = (run.get("summary") or {}).get(metric)
            if isinstance(value, int | float) and value > 0:
                yield Sample(suite or (run.get("suite") or {}).get("name", "?"), machine, metric,
                             arm["commit"], arm.get("date") or "", arm.get("subject") or "",
                             arm.get("depth") or 0, float(value), source, verdict)  # fmt: skip


def samples(doc: dict, source: str) -> list[Sample]:
    """The samples in one saved result: a `harness run` JSON (its arm), or an A/B result (each
    arm's runs under its own commit; head's carry the A/B's verdict)."""
    if isinstance(doc.get("runs"), list) and isinstance(doc.get("arm"), dict):
        return list(_samples_of_runs(doc["runs"], doc["arm"], [], "", source, None))
    if isinstance(doc.get("rounds"), list) and isinstance(doc.get("comparison"), dict):
        gate = _gated(doc.get("gate")) or [m["name"] for m in doc["comparison"]["metrics"]]
        out = []
        for arm, verdict in (("base", None), ("head", doc["comparison"].get("verdict"))):
            runs = [r.get(arm) for r in doc["rounds"] if isinstance(r, dict)]
            out += _samples_of_runs(runs, doc.get(arm), gate, doc.get("suite"), source, verdict)
        return out
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
