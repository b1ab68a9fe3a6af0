"""The gate on two simulated runs: deterministic (the same inputs give the same numbers), so a
metric's verdict is its ratio against the suite's tolerance, with no rounds and no interval:
worse beyond it REGRESSION, better beyond it IMPROVEMENT, else PASS (method "simulated": the
reports say "exact (simulated)" where a real A/B shows its interval). Memory is not simulated."""

from __future__ import annotations

from dataclasses import replace

from harness.results.comparison import Comparison, MetricResult
from harness.results.metrics import Method, metric
from harness.results.verdicts import EXIT_CODES, Verdict
from harness.stats.compare import check_fingerprints, gate_rounds, overall_verdict
from harness.stats.verdict import ratio_verdict


def compare_simulated(base: dict, head: dict, tolerances: dict[str, float]) -> Comparison:
    rounds = gate_rounds([{"round": 1, "base": base, "head": head}])
    fingerprint = check_fingerprints(rounds)
    runs = {arm: run for arm, run in rounds[0].runs.items() if run is not None}
    invalid = [f"{arm}: invalid: {'; '.join(run.invalid_reasons)}"
               for arm, run in runs.items() if not run.valid]  # fmt: skip
    metrics = []
    for name, tol in tolerances.items():
        b, h = runs["base"].value(name), runs["head"].value(name)
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
