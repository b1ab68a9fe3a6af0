"""A time budget for a whole job (a CI runner's limit): rounds are planned to end inside it, and
when it runs out before the gate decides, the verdict says what these rounds could resolve."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import psutil

from harness.results.comparison import MetricResult
from harness.results.verdicts import Verdict

MARGIN = 0.95  # of the budget planned for rounds: the report and the last teardown need a little
WIDEST = 2.0  # a resolvable change beyond 2x (or under 1/2x) is said as none


@dataclass(frozen=True, slots=True)
class Budget:
    minutes: float
    deadline: float  # time.monotonic() at which the job must be done

    @classmethod
    def from_start(cls, minutes: float) -> Budget:
        """Counted from this process's start: building the arms spends it too."""
        elapsed = max(0.0, time.time() - psutil.Process().create_time())
        return cls(minutes, time.monotonic() + minutes * 60 * MARGIN - elapsed)

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def rounds_that_fit(self, walls: list[float]) -> int:
        """How many more rounds end before the deadline, each as long as the slowest so far
        (a round's length varies: planning from a fast one overruns the runner's limit)."""
        return max(0, math.floor(self.left_s() / max(max(walls, default=0.0), 1e-3)))


def budget_note(minutes: float, rounds: int, metrics: list[MetricResult]) -> str:
    """What a job cut short by its budget says beside an undecided verdict: the smallest change
    each undecided metric's rounds could have resolved (the ratio caught 4 times in 5)."""
    parts = []
    for m in metrics:
        if m.verdict != Verdict.INCONCLUSIVE:
            continue
        smallest = m.detectable or m.mde
        if smallest is None:
            continue
        if smallest <= 0 or max(smallest, 1 / smallest) > WIDEST:
            parts.append(f"{m.name} none within {WIDEST:g}x")  # 2 rounds: 1 degree of freedom
        else:
            parts.append(f"{m.name} {(smallest - 1) * 100:+.1f}%")
    resolvable = (
        f"; the smallest change they resolve: {', '.join(parts)}"
        if parts
        else "; too few rounds for an interval: no change is resolvable from them"
    )
    return (
        f"the budget of {minutes:g} min ended after {rounds} round(s), before the gate "
        f"decided{resolvable} (more minutes or a quieter machine resolve smaller changes)"
    )


def search_within(suite, minutes: float | None, runs: int):
    """`suite` with its capacity search held to half of one run's share of the budget (at
    least 10 s): a search runs in every run of every arm, and the gate must end within
    `--budget-minutes` searches and all."""
    if not minutes or suite.capacity is None:
        return suite
    share = max(10.0, min(suite.capacity.budget_s, minutes * 60 / max(runs, 1) / 2))
    return replace(suite, capacity=replace(suite.capacity, budget_s=share))
