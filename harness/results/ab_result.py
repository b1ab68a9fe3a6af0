"""An A/B result as a record: the two arms, every round's runs and the comparison, as
`harness ab` and `harness compare` save it (docs/results.md)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.results.comparison import Comparison
from harness.results.record import Count, Pos, Record, Table, Words
from harness.results.run import Run, Simulation


@dataclass(frozen=True, kw_only=True)
class Arm(Record):
    """What one arm was: its label and, for a commit, the commit; else its command."""

    label: str
    ref: str | None
    commit: str | None = None
    cmd: Words | None
    flags: Words | None
    env: dict[str, str] | None
    date: str | None = None
    subject: str | None = None
    depth: Count | None = None
    dirty: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Crash(Record):
    """An arm that failed to start or whose server died under load: it ends the command."""

    arm: str
    round: Count
    message: str
    log_tail: str = ""


@dataclass(frozen=True, kw_only=True)
class Round(Record):
    """One round: each arm's run, in the order they were measured."""

    round: Count
    order: list[str] | None = None
    base: Run | None = None
    head: Run | None = None
    null: Run | None = None
    wall_s: float | None = None
    devices: dict[str, str] | None = None
    launch: list[str] | None = None
    turns: Count | None = None
    machine: Table | None = None  # what else the machine did meanwhile (runs/quiet.py)

    def of(self, arm: str) -> Run | None:
        """The arm's run this round (base, head or null); None where it has none."""
        return {"base": self.base, "head": self.head, "null": self.null}[arm]


@dataclass(frozen=True, kw_only=True)
class ABResult(Record):
    suite: str
    created: str
    base: Arm
    head: Arm
    rounds: list[Round]
    comparison: Comparison
    crash: Crash | None
    schema: str | None = None
    command: str | None = None
    gate: dict[str, float | None] | None = None
    memory_slack_bytes: Pos | None = None
    null_arm: bool | None = None
    schedule: Table | None = None
    simulated: Simulation | None = None
    raw: str | None = None
