"""The rounds an INCONCLUSIVE metric is told it needs: at that many rounds, simulated A/As with
the same per-round noise PASS about 4 times in 5 under the gate's own interval and rule, and
at half as many clearly less often (fixed seeds: the counts are certain)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.report.headline import gate_warnings, look_line
from harness.results.comparison import Comparison, Looks
from harness.stats.compare import compare_metric
from harness.stats.interval import rounds_to_pass


def pass_rate(spread: float, tolerance: float, rounds: int, runs: int = 200) -> float:
    rng = np.random.default_rng(int(spread * 1e4) + rounds)
    passed = 0
    for i in range(runs):
        head = list(np.exp(rng.normal(0, spread, rounds)))
        m = compare_metric("ttft_p50_ms", [1.0] * rounds, head, tolerance, seed=i)
        passed += m.verdict == "PASS"
    return passed / runs


@pytest.mark.parametrize("spread", [0.02, 0.04, 0.06])  # 0.06: past ten rounds, a bootstrap
def test_the_rounds_planned_pass_an_unchanged_head_four_times_in_five(spread):
    needed = rounds_to_pass(spread, math.log1p(0.05))
    assert needed is not None and needed > 2
    at_plan = pass_rate(spread, 0.05, needed)
    print(f"spread {spread}: {needed} rounds, PASS {at_plan:.2f}")
    assert at_plan >= 0.7
    assert pass_rate(spread, 0.05, max(2, needed // 2)) < at_plan - 0.1


def test_the_plan_grows_with_the_noise_and_shrinks_with_the_tolerance():
    five = [rounds_to_pass(s, math.log1p(0.05)) for s in (0.01, 0.03, 0.05, 0.08)]
    assert five == sorted(five) and five[-1] > 9  # 8% a round: beyond the default nine
    assert rounds_to_pass(0.08, math.log1p(0.15)) < five[-1]
    assert rounds_to_pass(0.5, math.log1p(0.01)) is None


def test_an_inconclusive_metric_says_the_rounds_it_needs():
    m = compare_metric("ttft_p50_ms", [1.0] * 3, [1.0, 1.09, 0.98], 0.05)
    assert m.verdict == "INCONCLUSIVE"
    comparison = Comparison(verdict="INCONCLUSIVE", exit_code=0, rounds=3, metrics=[m],
                            invalid=[], warnings=[])  # fmt: skip
    (line,) = gate_warnings(comparison)
    needed = rounds_to_pass(m.spread, math.log1p(0.05))
    assert line.endswith(
        f"add rounds (about {needed} at this noise: {m.spread * 100:.1f}% a round)"
    )


def vars_of(m) -> dict:
    return {k: getattr(m, k) for k in m.__slots__} if hasattr(m, "__slots__") else dict(vars(m))


def test_a_look_that_leaves_the_gate_undecided_says_the_rounds_and_minutes_ahead():
    m = compare_metric("ttft_p50_ms", [1.0] * 3, [1.0, 1.09, 0.98], 0.05)
    done = compare_metric("tok_s", [1.0] * 3, [1.0, 1.0, 1.0], 0.05)
    needed = rounds_to_pass(m.spread, math.log1p(0.05))
    looks = Looks(looks=[3, 5, 7, 9], alpha=0.01)
    comparison = Comparison(verdict="INCONCLUSIVE", exit_code=0, rounds=3, metrics=[m, done],
                            invalid=[], warnings=[], schedule=looks)  # fmt: skip
    line = look_line(comparison, 5, [30.0, 40.0, 50.0])  # 40 s a round, the median
    minutes = (needed - 3) * 40 / 60
    assert line.startswith("look at 3 rounds: undecided, ttft_p50_ms about ")
    assert (
        f"about {needed} rounds at {m.spread * 100:.1f}% a round (~{minutes:.0f} min more" in line
    )
    assert ("past the last look (9)" in line) == (needed > 9)
    assert "tok_s" not in line and line.endswith("next look at 5")
