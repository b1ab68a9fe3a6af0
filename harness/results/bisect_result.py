"""A bisect's result as a record: the commits between good and bad, each A/B on the way and
the commit it found (bisect/bisector.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.results.comparison import Comparison
from harness.results.record import Count, Record


@dataclass(frozen=True, kw_only=True)
class Commit(Record):
    short: str
    subject: str
    sha: str | None = None
    merge: bool | None = None
    mark: str | None = None


@dataclass(frozen=True, kw_only=True)
class Step(Record):
    """One A/B of the search: which commits, its verdict and the mark it gave."""

    role: str | None = None
    base: Commit | None = None
    head: Commit | None = None
    rounds: Count | None = None
    ratio: str | None = None
    ci: str | None = None
    verdict: str | None = None
    mark: str | None = None
    reason: str | None = None
    wall_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class BisectResult(Record):
    suite: str
    culprit: Commit | None = None
    schema: str | None = None
    created: str | None = None
    command: str | None = None
    good: Commit | None = None
    bad: Commit | None = None
    metrics: list[str] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    path: list[Step] = field(default_factory=list)
    comparisons: list[Comparison | None] = field(default_factory=list)  # None: a skipped step
    suspects: list[Commit] = field(default_factory=list)
    skipped: list[Step] = field(default_factory=list)
    unresolved: list[Step] = field(default_factory=list)
    final: Step | None = None
    final_report: str | None = None
    budget_ended: str | None = None
    interrupted: bool | None = None  # stopped by a signal before it named a commit
