"""The gate on two simulated runs: deterministic (the same inputs give the same numbers), so a
metric's verdict is its ratio against the suite's tolerance, with no rounds and no interval:
worse beyond it REGRESSION, better beyond it IMPROVEMENT, else PASS (method "simulated": the
reports say "exact (simulated)" where a real A/B shows its interval). Memory is not simulated."""

from __future__ import annotations

from dataclasses import replace

from harness.results.comparison import Comparison, MetricResult
from harness.results.errors import ComparisonError
from harness.results.metrics import Method, metric
from harness.results.verdicts import EXIT_CODES, Verdict
from harness.stats.compare import GateRound, check_fingerprints, overall_verdict
from harness.stats.verdict import ratio_verdict


def compare_simulated(rnd: GateRound, tolerances: dict[str, float]) -> Comparison:
    """The one simulated round `rnd` (base and head both there) gated."""
    fingerprint = check_fingerprints([rnd])
    pair = rnd.pair("head")
    if pair is None:
        raise ComparisonError("a simulated comparison needs a base and a head run")
    named = zip(("base", "head"), pair, strict=True)
    invalid = [f"{arm}: invalid: {'; '.join(run.invalid_reasons)}"
               for arm, run in named if not run.valid]  # fmt: skip
    metrics = []
    for name, tol in tolerances.items():
        b, h = (run.summary.get(name) for run in pair)
        better = metric(name).lower_is_better
        unjudged = MetricResult(name=name, base=[b], head=[h], ratio=None, ci_low=None,
                                ci_high=None, tolerance=tol, verdict=Verdict.NA, mde=None,
                                method=Method.SIMULATED, lower_is_better=better,
                                note="not simulated")  # fmt: skip
        if b is None or h is None or b <= 0:
            metrics.append(unjudged)
            continue
        r = h / b
        judged = ratio_verdict(r, r, r, tol, better)
        metrics.append(replace(unjudged, ratio=r, ci_low=r, ci_high=r, verdict=judged, note="",
                               evidence_low=r, evidence_high=r, base_value=b,
                               head_value=h))  # fmt: skip
    verdict = overall_verdict(metrics, invalid)
    return Comparison(
        verdict=verdict,
        exit_code=EXIT_CODES[verdict],
        rounds=1,
        fingerprint=fingerprint,
        metrics=metrics,
        invalid=invalid,
        warnings=[],
    )
