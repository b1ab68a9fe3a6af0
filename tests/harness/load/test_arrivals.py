"""Arrival shapes: gamma burstiness keeps its coefficient of variation, a ramp's arrivals follow
its rate curve, staged load becomes one rate phase per stage, and a shape that cannot be is one
line and exit 2."""

from __future__ import annotations

import math
import statistics
from functools import partial

import pytest

from harness.load.arrivals import arrival_offsets, offered_rate, ramp_span
from harness.load.arrivals import rate_at as arrival_rate_at
from harness.workload.arrival import Rate
from harness.workload.phase import Phase
from harness.workload.suite import SuiteError, load_suite

from helpers.cli import harness, outside_git
from helpers.suites import SUITE, write_suite


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 4.0])
def test_gamma_gaps_keep_their_coefficient_of_variation(burstiness):
    phase = Phase("p", arrival=Rate(20.0, burstiness=burstiness), requests=1001, seed=3)
    t = arrival_offsets(phase)
    gaps = [b - a for a, b in zip(t, t[1:], strict=False)]
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    target = 1 / math.sqrt(burstiness)
    print(f"burstiness {burstiness}: CV {cv:.3f} (target {target:.3f})")
    assert abs(cv - target) <= 0.10 * target
    assert abs(statistics.fmean(gaps) - 1 / 20) <= 0.1 / 20  # the rate holds


@pytest.mark.parametrize("rate,requests,seed", [(16.0, 128, 16000), (4.0, 16, 1), (45.25, 362, 7)])
def test_a_rate_level_offers_exactly_the_rate_it_is_named_with(rate, requests, seed):
    # A seeded sample of 128 arrivals once offered 13.2 req/s for a level named 16.
    phase = Phase("p", arrival=Rate(rate), requests=requests, seed=seed)
    t = arrival_offsets(phase)
    assert t[0] == 0.0 and len(t) == requests
    assert offered_rate(t) == pytest.approx(rate, rel=1e-9)
    assert t[-1] == pytest.approx((requests - 1) / rate, rel=1e-9)


@pytest.mark.parametrize("ramp", ["linear", "exponential"])
@pytest.mark.parametrize("start,end", [(1.0, 9.0), (8.0, 2.0)])
def test_a_ramps_arrivals_follow_its_rate_curve(ramp, start, end):
    phase = Phase("p", arrival=Rate(start, ramp=ramp, ramp_to=end), requests=800, seed=5)
    t = arrival_offsets(phase)
    span = ramp_span(phase.arrival, 800)
    rate_at = partial(arrival_rate_at, phase.arrival, 800)
    assert rate_at(0) == start and rate_at(span) == pytest.approx(end)
    for x in (0.1, 0.25, 0.5, 0.75, 0.9):  # arrivals so far vs the curve's integral
        at = x * span
        expected = sum(rate_at(at * (k + 0.5) / 400) for k in range(400)) * at / 400
        seen = sum(1 for s in t if s <= at)
        assert abs(seen - expected) <= 4 * math.sqrt(expected) + 2, (x, seen, expected)
    # per-second counts in the middle of the ramp track its rate there
    mid = [s for s in t if 0.4 * span <= s < 0.6 * span]
    assert len(mid) / (0.2 * span) == pytest.approx(rate_at(0.5 * span), rel=0.25)


def test_staged_load_is_one_rate_phase_per_stage(tmp_path):
    stages = "stages = [{rate = 2, duration_s = 3}, {rate = 4.5, duration_s = 2}]"
    staged = SUITE.format(extra="").replace("requests = 6", stages)
    suite = load_suite(str(write_suite(tmp_path, staged)))
    assert [(p.name, p.arrival.mode, p.arrival.rate, p.requests) for p in suite.phases] == [
        ("load-1", "rate", 2, 6), ("load-2", "rate", 4.5, 9),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "extra, said",
    [
        ('arrival = "rate"\nrate = 2\nramp = "linear"\nramp_to = -1', "cannot end at or below 0"),
        ('arrival = "rate"\nrate = 2\nburstiness = 0', "burstiness must be a finite number > 0"),
        ("burstiness = 0.5", 'burstiness and ramp need arrival = "rate"'),
        ('arrival = "rate"\nrate = 2\nramp = "sideways"\nramp_to = 3', "ramp must be linear"),
        ('arrival = "rate"\nrate = 2\nramp = "linear"', "needs both ramp and ramp_to"),
    ],
)
def test_a_shape_that_cannot_be_is_one_line_and_exit_2(tmp_path, extra, said):
    text = SUITE.format(extra="").replace("max_tokens = 4", f"max_tokens = 4\n{extra}")
    path = write_suite(tmp_path, text)
    with pytest.raises(SuiteError, match=said):
        load_suite(str(path))
    r = harness("run", "--suite", str(path), "--dry-run", cwd=tmp_path, env=outside_git(tmp_path))
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
