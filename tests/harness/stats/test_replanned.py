"""`--max-rounds auto` and a time budget move the last look; what the looks done spent stays
spent and the whole plan spends exactly the gate's alpha. Simulated whole gates at the README
suite's measured noise and a 5% TTFT p50 tolerance: the plan moves out to the rounds the noise
needs, decides, and keeps false regressions at 1% (fixed seeds: the counts are certain)."""

from __future__ import annotations

import collections

import pytest

from harness.results.comparison import Comparison, MetricResult
from harness.stats.compare import compare_metric, overall_verdict
from harness.stats.rounds_needed import extended, last_look_needed, rounds_needed
from harness.stats.sequential import AUTO_MAX_ROUNDS, GATE_ALPHA, Schedule

from helpers.gate_sim import Noise, verdicts


def spent(s: Schedule) -> list[float]:
    return [s.look_alpha(r) for r in s.looks]


def test_a_plan_never_moved_spends_as_the_fixed_one_did():
    s = Schedule.plan(3, 9)
    cumulative = [GATE_ALPHA * (r / 9) ** 2 for r in (0, 3, 5, 7, 9)]
    assert spent(s) == pytest.approx(
        [b - a for a, b in zip(cumulative, cumulative[1:], strict=False)]
    )
    assert Schedule.from_dict(s.to_dict()) == s


def test_moving_the_last_look_out_keeps_what_the_first_look_spent():
    s = Schedule.plan(3, 9)
    first = s.look_alpha(3)
    out = s.replanned(3, 23)
    assert out.looks == (3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23)
    assert out.look_alpha(3) == pytest.approx(first)
    assert sum(spent(out)) == pytest.approx(GATE_ALPHA)
    later = spent(out)[1:]
    assert later == sorted(later)  # the rest still little early, most at the end
    assert Schedule.from_dict(out.to_dict()) == out
    twice = out.replanned(7, 31)  # moved again at a later look
    assert spent(twice)[:3] == pytest.approx(spent(out)[:3])
    assert sum(spent(twice)) == pytest.approx(GATE_ALPHA) and twice.looks[-1] == 31


def test_a_budget_moves_the_last_look_in_and_still_spends_alpha():
    s = Schedule.plan(3, 9).replanned(5, 6)
    assert s.looks == (3, 5, 6) and sum(spent(s)) == pytest.approx(GATE_ALPHA)
    assert Schedule.plan(3, 9).replanned(1, 2).looks == (2,)  # before the first look
    assert Schedule.plan(4, 12, block=2).replanned(6, 10).looks == (4, 6, 8, 10)


def judged_comparison(rounds: int, metrics: list[MetricResult]) -> Comparison:
    verdict = overall_verdict(metrics, [])
    return Comparison(verdict=verdict, exit_code=0, rounds=rounds, metrics=metrics, invalid=[],
                      warnings=[])  # fmt: skip


def metric(base, head, tolerance, name="ttft_p50_ms") -> MetricResult:
    return compare_metric(name, base, head, tolerance)


def test_the_last_look_needed_is_the_most_any_undecided_metric_needs():
    noisy = metric([1.0] * 3, [1.0, 1.09, 0.98], 0.05)
    quieter = metric([1.0] * 3, [1.0, 1.03, 0.99], 0.05, "itl_p50_ms")
    decided = metric([1.0] * 3, [1.0, 1.0, 1.0], 0.05, "tok_s")
    assert noisy.verdict == quieter.verdict == "INCONCLUSIVE"
    needs = rounds_needed(noisy)[0], rounds_needed(quieter)[0]
    comparison = judged_comparison(3, [noisy, quieter, decided])
    assert last_look_needed(comparison, 41) == max(needs) and needs[0] > needs[1] > 3
    assert last_look_needed(comparison, 10) == 10  # no further than the ceiling
    assert last_look_needed(comparison, 41, block=4) % 4 == 0
    assert last_look_needed(judged_comparison(3, [decided]), 41) is None
    plan = Schedule.plan(3, 9)
    assert extended(plan, comparison, 41).looks[-1] == max(needs[0], 9)
    assert extended(plan, judged_comparison(3, [decided]), 41) == plan


# The README suite's measured noise (docs/statistics.md, "Noise per round": TTFT p50 7.7% a
# round), gated at 5% on TTFT p50 alone: the tolerance the noise alone decides.
README_NOISE = Noise(ttft=0.054, tok_s=0.035, shared=0.5)
FIVE = {"ttft_p50_ms": 0.05}


def test_auto_resolves_five_percent_at_the_readme_suites_noise():
    fixed = collections.Counter(r.verdict for r in verdicts(300, README_NOISE, seed=8,
                                                            tolerances=FIVE))  # fmt: skip
    auto = verdicts(300, README_NOISE, seed=8, tolerances=FIVE, extend_to=AUTO_MAX_ROUNDS)
    counts = collections.Counter(r.verdict for r in auto)
    rounds = sorted(r.rounds for r in auto)
    beyond = sum(r > 9 for r in rounds)
    print(f"5% at 7.7% a round: nine rounds {dict(fixed)}; auto {dict(counts)}, "
          f"{beyond} past nine rounds, the longest {rounds[-1]}")  # fmt: skip
    assert counts["PASS"] > 0.9 * 300 and fixed["PASS"] < 0.6 * 300  # nine often cannot
    assert counts["REGRESSION"] + counts["IMPROVEMENT"] <= 3  # <= 1%
    assert beyond > 0.25 * 300 and rounds[-1] <= AUTO_MAX_ROUNDS
