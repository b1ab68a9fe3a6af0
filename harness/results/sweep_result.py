"""A sweep's result as a record: each level's comparison and the curves, knees and capacity
judged from them (sweep/judgement.py), with every run it measured."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.results.ab_result import Arm
from harness.results.comparison import Comparison
from harness.results.record import Code, Count, Pos, Record, Table
from harness.results.run import Run


@dataclass(frozen=True, kw_only=True)
class Judgement(Record):
    verdict: str
    exit_code: Code
    levels: dict[str, Comparison] | None = None
    invalid: list[str] = field(default_factory=list)
    curves: Table | None = None
    knee: Table | None = None
    knee_gain: float | None = None
    knee_moved: bool | None = None
    goodput: Table | None = None
    slo_met: Table | None = None
    slos: list[Table] | None = None
    capacity: Table | None = None
    first_regression: str | None = None
    first_regression_metrics: list[str] | None = None


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
    by_level: dict[str, list[Table]] | None = None
    crash: Table | None = None
    simulated: Table | None = None
    raw: str | None = None
