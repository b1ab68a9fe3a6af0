"""A sweep's result as a record: each level's rounds, each arm's curve (medians per level), its
knee, goodput and capacity, the comparison per level (sweep/judgement.py), and every run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.results.ab_result import Arm, Crash
from harness.results.comparison import Comparison
from harness.results.metrics import metric
from harness.results.record import Code, Count, MetricName, Pos, Record, Table
from harness.results.run import CapacitySearch, Run, Simulation


@dataclass(frozen=True, kw_only=True)
class LevelRun(Record):
    """One arm's run at one level (or its capacity search), shaped like a run for the gate."""

    fingerprint: str | None
    valid: bool
    invalid_reasons: list[str]
    summary: dict[str, float | None]
    counters: dict[str, float | None] = field(default_factory=dict)
    memory_source: str | None = None
    simulated: Simulation | None = None
    capacity: CapacitySearch | None = None  # a capacity search's own record
    request_count: Count | None = None  # written by the slim JSON (report/ab_report.slim)


@dataclass(frozen=True, kw_only=True)
class LevelRound(Record):
    """One round at one level: each arm's run there (None where it did not reach it)."""

    round: Count
    null: LevelRun | None = None
    base: LevelRun | None = None
    head: LevelRun | None = None
    arm: LevelRun | None = None  # a sweep of one arm

    def of(self, arm: str) -> LevelRun | None:
        return getattr(self, arm)


@dataclass(frozen=True, kw_only=True)
class CurvePoint(Record):
    """One level of one arm's curve: medians over its rounds of every summary metric (kept
    beside the point's own fields in JSON) and of its counters' deltas."""

    FLAT: ClassVar[str] = "medians"
    name: str
    level: Pos
    rounds: Count
    valid: bool
    counters: dict[str, float | None] = field(default_factory=dict)
    medians: dict[str, float | None] = field(default_factory=dict)

    def median(self, name: str) -> float | None:
        """The median of a catalogue metric (an unknown name is a KeyError, not a None)."""
        return self.medians.get(metric(name).name)


@dataclass(frozen=True, kw_only=True)
class SloRule(Record):
    metric: MetricName
    limit: float
    rule: str


@dataclass(frozen=True, kw_only=True)
class Bracket(Record):
    """One capacity search: the highest level met, the lowest missed, the capacity there."""

    met_level: float | None
    missed_level: float | None
    capacity_req_s: float | None
    levels: Count


@dataclass(frozen=True, kw_only=True)
class ArmCapacity(Record):
    capacity_req_s: float | None
    runs: list[Bracket]


@dataclass(frozen=True, kw_only=True)
class Judgement(Record):
    verdict: str
    exit_code: Code
    curves: dict[str, list[CurvePoint]] = field(default_factory=dict)
    knee: dict[str, float | None] = field(default_factory=dict)
    knee_gain: float | None = None
    goodput: dict[str, float | None] = field(default_factory=dict)
    slo_met: dict[str, list[bool]] = field(default_factory=dict)
    slos: list[SloRule] = field(default_factory=list)
    capacity: dict[str, ArmCapacity] | None = None
    levels: dict[str, Comparison] | None = None  # with two arms: the comparison per level
    invalid: list[str] = field(default_factory=list)
    first_regression: str | None = None
    first_regression_metrics: list[str] | None = None
    knee_moved: bool | None = None


@dataclass(frozen=True, kw_only=True)
class SweepRun(Record):
    run: Run | None = None
    round: Count | None = None
    arm: str | None = None


@dataclass(frozen=True, kw_only=True)
class SweepResult(Record):
    suite: str
    judgement: Judgement
    runs: list[SweepRun] = field(default_factory=list)
    schema: str | None = None
    created: str | None = None
    command: str | None = None
    mode: str | None = None
    levels: list[float] | None = None
    names: list[str] | None = None
    requests: dict[str, Count] | None = None
    phase: Table | None = None
    cold: str | None = None
    capacity_plan: str | None = None
    rounds: Count | None = None
    arms: dict[str, Arm] | None = None
    gate: dict[str, float | None] | None = None
    memory_slack_bytes: Pos | None = None
    by_level: dict[str, list[LevelRound]] = field(default_factory=dict)
    crash: Crash | None = None
    budget_ended: str | None = None
    simulated: Simulation | None = None
    raw: str | None = None
