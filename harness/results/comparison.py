"""What the gate concluded, as records: each metric's comparison over the paired rounds
(`MetricResult`), and the whole comparison with its overall verdict and exit code
(`Comparison`). stats/compare.py computes them; every view reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.results.metrics import Method
from harness.results.record import Code, MetricName, Pos, Record, Rounds
from harness.results.verdicts import EXIT_CODES, INVALID, Verdict


@dataclass(frozen=True, kw_only=True)
class MetricResult(Record):
    name: MetricName
    base: list[float | None] = field(default_factory=list)  # per round, paired with head
    head: list[float | None] = field(default_factory=list)
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    tolerance: Pos
    verdict: Verdict
    mde: float | None
    method: Method
    lower_is_better: bool = True
    note: str | None
    alpha: float | None = None  # one-sided alpha a REGRESSION had to clear at this look
    evidence_low: float | None = None  # the (1 - alpha) t-bounds on the ratio
    evidence_high: float | None = None
    detectable: float | None = None  # the true ratio this look catches 4 times in 5 (power)
    base_value: float | None = None  # the value that stands for each arm's rounds (the
    head_value: float | None = None  # catalogue's centre): what reports and the terminal show
    spread: float | None = None  # sd of ln(head/base) per round: the noise an interval met
    order_effect: float | None = None  # head measured second / first, when fitted
    rounds_to_pass: Rounds | None = None  # an unchanged head's rounds to PASS at this noise
    # (rounds_needed.py; MOST_ROUNDS + 1: more than that; None: nothing to plan from)
    changed: bool = False  # a PASS the gate itself calls changed (verdict.changed_within_tolerance)


@dataclass(frozen=True, kw_only=True)
class Looks(Record):
    """The looks of the sequential rule and its alpha (stats/sequential.py's Schedule)."""

    looks: list[Rounds]
    alpha: float
    spent: list[float] | None = None


@dataclass(frozen=True, kw_only=True)
class Comparison(Record):
    verdict: str
    exit_code: Code
    rounds: Rounds
    fingerprint: str = ""
    metrics: list[MetricResult]
    noise: list[MetricResult] = field(default_factory=list)  # null arm vs base
    invalid: list[str]
    warnings: list[str]
    schedule: Looks | None = None
    ungated: list[MetricResult] = field(default_factory=list)  # compared, never judged
    block: Rounds = 1  # rounds per device cycle: an interval is taken over whole cycles

    @classmethod
    def invalid_only(cls, problems: list[str], rounds: int = 0, block: int = 1) -> Comparison:
        """Nothing comparable ran, or it must not be compared: the problems are the verdict."""
        return cls(
            verdict=INVALID,
            exit_code=EXIT_CODES[INVALID],
            rounds=rounds,
            metrics=[],
            invalid=problems,
            warnings=[],
            block=block,
        )
