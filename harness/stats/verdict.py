"""Per-metric verdict rules: the decision a gate takes from a ratio estimate and its interval
(or from min/max peaks for memory); which way is better is the catalogue's
(harness/results/metrics.py)."""

from __future__ import annotations

import math

from harness.results.comparison import MetricResult
from harness.results.metrics import Method
from harness.results.verdicts import Verdict


def ratio_verdict(
    ratio: float,
    ci_low: float | None,
    ci_high: float | None,
    tol: float,
    lower_better: bool,
    *,
    evidence: tuple[float, float] | None = None,
) -> Verdict:
    """Verdict from head/base ratio estimate and its CI against a relative tolerance.
    `evidence` (low, high), when given, is the stricter interval a change must clear instead
    of the CI (the sequential gate's per-look alpha, harness/stats/sequential.py): in either
    direction, since an IMPROVEMENT is a claim too. A better estimate whose evidence is not
    in yet is a PASS (the CI rules out the regression)."""
    if ci_low is None or ci_high is None or not math.isfinite(ratio):
        return Verdict.INCONCLUSIVE
    ev_low, ev_high = evidence or (ci_low, ci_high)
    if lower_better:
        bad_limit, good_limit = 1 + tol, 1 - tol
    else:
        # Flip so that "bigger is worse" below; limits stay 1 -/+ tol on the raw ratio.
        ratio, ci_low, ci_high = 1 / ratio, 1 / ci_high, 1 / ci_low
        ev_low, ev_high = 1 / ev_high, 1 / ev_low
        bad_limit, good_limit = 1 / (1 - tol), 1 / (1 + tol)
    if ev_low > 1 and ratio > bad_limit:
        return Verdict.REGRESSION
    if ev_high < 1 and ratio < good_limit:
        return Verdict.IMPROVEMENT
    if ci_high <= bad_limit:
        return Verdict.PASS
    return Verdict.INCONCLUSIVE


def peak_verdict(base: list[float], head: list[float], tol: float, slack_bytes: float) -> Verdict:
    """Min/max rule for near-deterministic memory peaks (lower is better)."""
    if min(head) > max(base) * (1 + tol) + slack_bytes:
        return Verdict.REGRESSION
    if max(head) < min(base) * (1 - tol) - slack_bytes:
        return Verdict.IMPROVEMENT
    return Verdict.PASS


def changed_within_tolerance(m: MetricResult) -> bool:
    """A PASS the gate itself would call changed: its one-sided bounds at the look's alpha (the
    ones a REGRESSION must clear) lie both on one side of 1. A 95% CI that merely excludes 1 is
    a per-metric 5% claim: on an A/A of three metrics one shows up about once in seven runs, so
    it does not count (docs/statistics.md, "Changed within tolerance")."""
    if m.verdict != Verdict.PASS or m.method not in (Method.T, Method.BOOTSTRAP):
        return False
    low, high = m.evidence_low, m.evidence_high
    if None in (m.ci_low, m.ci_high, m.ratio) or low is None or high is None:
        return False
    return not low <= 1 <= high
