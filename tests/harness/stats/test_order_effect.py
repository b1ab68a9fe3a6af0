"""The order effect: the arm measured second in a round reads slower (measured: TTFT p50 +3 to
+9% in six A/As of the README suite). Rounds alternate the order (AB, BA, ...), so the ratio's
estimate is not biased, but the effect widens the spread. With enough rounds in each order the
gate fits it as a term and takes it out (interval.paired_logs): the false-regression rate holds
and an A/A with an order effect decides sooner."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

from harness.stats.compare import GateRound, compare_metric, measured_later
from harness.stats.interval import ORDER_FROM_ROUNDS, paired_logs, ratio_interval

from helpers.gate_sim import Noise, verdicts

ORDERED = Noise(ttft=0.05, tok_s=0.05, order=0.06)  # 6% slower when measured second


def alternating(n: int) -> list[bool]:
    return [i % 2 == 0 for i in range(n)]  # head after base in rounds 1, 3, 5, ...


def test_a_pure_order_effect_is_fitted_and_taken_out():
    later = alternating(8)
    base = [100.0 * (1.0 if h else 1.06) for h in later]
    head = [100.0 * (1.06 if h else 1.0) * (1 + 0.001 * i) for i, h in enumerate(later)]
    fit = paired_logs(base, head, later)
    assert fit.df == 6 and fit.order_effect == pytest.approx(2 * math.log(1.06), rel=0.01)
    raw = paired_logs(base, head)
    assert raw.order_effect is None and raw.df == 7
    assert fit.spread < raw.spread / 20  # what is left is the 0.1% a round
    assert fit.mean == pytest.approx(raw.mean, abs=1e-3)  # balanced: the same centre
    ci = ratio_interval(fit)
    assert ci.ci_low < ci.ratio < ci.ci_high and ci.ci_high / ci.ci_low < 1.01


@pytest.mark.parametrize(
    "later",
    [alternating(ORDER_FROM_ROUNDS - 1), [True, True, True, True, False, False], None],
)
def test_too_few_rounds_in_an_order_fit_nothing(later):
    n = len(later) if later else 7
    fit = paired_logs([1.0] * n, [1.0 + 0.01 * (i % 3) for i in range(n)], later)
    assert fit.order_effect is None and fit.df == n - 1


def test_a_round_that_does_not_say_its_order_fits_nothing():
    orders = [["base", "head"], ["head", "base"], []]
    rounds = [GateRound(i + 1, {}, order) for i, order in enumerate(orders)]
    assert measured_later(rounds, "head") is None
    assert measured_later(rounds[:2], "head") == [True, False]
    three = [GateRound(1, {}, ["head", "null", "base"])]
    assert measured_later(three, "null") == [False]


def test_the_metric_reports_the_fitted_effect():
    later = alternating(8)
    base = [100.0 * (1.0 if h else 1.05) for h in later]
    head = [100.0 * (1.05 if h else 1.0) for h in later]
    m = compare_metric("ttft_p50_ms", base, head, 0.05, alpha=0.005, later=later)
    assert m.order_effect == pytest.approx(1.05**2, rel=1e-6)
    assert m.verdict == "PASS" and m.spread == pytest.approx(0, abs=1e-9)


def counts(results) -> collections.Counter:
    return collections.Counter(r.verdict for r in results)


def test_the_false_regression_rate_holds_with_and_without_an_order_effect():
    for noise, seed in ((ORDERED, 11), (Noise(ttft=0.07, tok_s=0.04), 12)):
        got = counts(verdicts(1000, noise, seed=seed))
        print(f"A/A at {noise}: {dict(got)}")
        assert got["REGRESSION"] <= 10 and got["IMPROVEMENT"] <= 10  # <= 1%


def test_an_order_effect_costs_an_aa_less_once_it_is_fitted(monkeypatch):
    tight = {"ttft_p50_ms": 0.05, "tok_s": 0.05}  # where the spread decides, as at 5%
    fitted = counts(verdicts(200, ORDERED, seed=13, tolerances=tight))
    import harness.stats.compare as compare

    monkeypatch.setattr(compare, "measured_later", lambda rounds, arm: None)
    ignored = counts(verdicts(200, ORDERED, seed=13, tolerances=tight))  # the same rounds
    print(f"fitted {dict(fitted)}, ignored {dict(ignored)}")
    assert fitted["PASS"] >= ignored["PASS"] + 20
    assert fitted["REGRESSION"] <= 2


def test_the_simulated_rounds_carry_the_effect():
    from helpers.gate_sim import one_run

    rng = np.random.default_rng(0)
    quiet = Noise(ttft=1e-6, tok_s=1e-6, rss=1e-6, round_drift=0)
    slow = one_run(rng, quiet, ORDERED.order, 1.0)["summary"]["ttft_p50_ms"]
    fast = one_run(rng, quiet, 0.0, 1.0)["summary"]["ttft_p50_ms"]
    assert slow / fast == pytest.approx(math.exp(0.06), rel=1e-3)
