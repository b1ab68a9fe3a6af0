"""How many rounds the noise measured needs: per metric (said at each look and in the report),
and the last look `--max-rounds auto` moves the plan out to. Blinded to the head/base
difference: only the per-round spread and the tolerance enter, so moving the last look by it
keeps the gate's false-regression rate (sequential.py `replanned`)."""

from __future__ import annotations

import math

from harness.results.comparison import Comparison, MetricResult
from harness.results.verdicts import Verdict
from harness.stats.interval import rounds_to_pass
from harness.stats.sequential import Schedule


def rounds_needed(m: MetricResult) -> tuple[int | None, float] | None:
    """(rounds, spread): the rounds after which an unchanged head PASSes this metric's tolerance
    4 times in 5 at the per-round spread its rounds showed (None: more than 1000); None when the
    metric has no spread or tolerance to plan from."""
    spread, tol = m.spread, m.tolerance
    if not spread or not tol or not 0 < tol < 1:
        return None
    limit = math.log1p(tol) if m.lower_is_better else -math.log1p(-tol)
    return rounds_to_pass(spread, limit), spread


def last_look_needed(comparison: Comparison, ceiling: int, block: int = 1) -> int | None:
    """The last look the undecided metrics need at the noise this look measured: the most any
    INCONCLUSIVE metric needs, up to `ceiling` (a metric that needs more than it asks for the
    ceiling), in whole blocks. None when no undecided metric can say."""
    needs = []
    for m in comparison.metrics:
        if m.verdict == Verdict.INCONCLUSIVE and (planned := rounds_needed(m)) is not None:
            needs.append(ceiling if planned[0] is None else min(planned[0], ceiling))
    if not needs:
        return None
    last = max(needs)
    return -(-last // block) * block if block > 1 else last


def extended(schedule: Schedule, comparison: Comparison, ceiling: int, block: int = 1) -> Schedule:
    """`--max-rounds auto` after a look that left the gate undecided: the schedule with its
    last look moved out to `last_look_needed` (never in), the looks done keeping what they
    spent."""
    needed = last_look_needed(comparison, ceiling, block)
    if needed is None or needed <= schedule.looks[-1]:
        return schedule
    return schedule.replanned(comparison.rounds, needed)
