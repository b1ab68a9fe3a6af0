"""The capacity search's rule, on levels whose outcome is given: double while met, halve while
missed, then the geometric middle until the bracket is within the precision; the summary keeps
every level and the load sustained at the highest level met; a search beyond one machine
is refused."""

from __future__ import annotations

import re

import pytest

from harness.workload.capacity import (
    CapacityError,
    CapacityPlan,
    Tried,
    attained,
    capacity_summary,
    next_level,
)
from harness.workload.levels import MAX_REQUESTS, default_requests
from harness.workload.suite import SuiteError, load_suite

from helpers.suites import write_suite


def search(plan: CapacityPlan, limit: float) -> list[float]:
    """The levels tried against a server that meets the SLO up to `limit` exactly."""
    tried = []
    while (level := next_level(plan, tried)) is not None:
        tried.append(Tried(level, 1.0 if level <= limit else 0.5, level * 10))
    return [t.level for t in tried]


def test_a_rate_search_doubles_then_bisects_to_the_precision():
    plan = CapacityPlan("rate", start=1, most=256, precision=0.10)
    levels = search(plan, 37.0)
    assert levels[:7] == [1, 2, 4, 8, 16, 32, 64]
    assert len(levels) <= plan.steps
    summary = capacity_summary(plan, [Tried(v, 1.0 if v <= 37 else 0.0, v * 10) for v in levels])
    low, high = summary["met_level"], summary["missed_level"]
    assert low <= 37 < high and high <= low * 1.10
    assert summary["capacity_req_s"] == low  # the rate offered at the highest level met
    closed = CapacityPlan("concurrency", start=1, most=64)
    found = capacity_summary(closed, [Tried(4, 1.0, 39.5), Tried(8, 0.5, 41.0)])
    assert found["capacity_req_s"] == 39.5  # closed loop: what it served there


def test_a_concurrency_search_ends_on_neighbouring_whole_levels():
    plan = CapacityPlan("concurrency", start=1, most=64)
    assert search(plan, 4) == [1, 2, 4, 8, 6, 5]
    assert search(plan, 64) == [1, 2, 4, 8, 16, 32, 64]  # never beyond the most
    assert search(CapacityPlan("concurrency", start=8, most=64), 2) == [8, 4, 2, 3]
    assert search(CapacityPlan("concurrency", start=2, most=64), 0) == [2, 1]  # nothing met


def test_the_search_is_bounded_in_steps():
    plan = CapacityPlan("rate", start=1, most=1e4, precision=0.01, steps=5)
    assert len(search(plan, 1000.0)) == 5


def test_attainment_is_the_share_of_sent_requests_within_every_limit():
    stats = {"ok": 18, "requests": 20, "goodput_req_s": 4.5, "req_s": 6.0}
    assert attained(stats) == pytest.approx(4.5 / 6.0 * 18 / 20)
    assert attained(stats | {"ok": 0, "req_s": None}) == 0.0
    dropped = stats | {"requests": 26, "cancelled": 6}  # cancelled by the suite: not misses
    assert attained(dropped) == pytest.approx(attained(stats))


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ('mode = "burst"', "capacity.mode"),
        ("start = 0", "0 < start <= max"),
        ('mode = "concurrency"\nstart = 1.5', "whole clients"),
        ("precision = 1.5", "precision"),
        ("steps = true", "steps"),
        ("speed = 2", "speed"),
    ],
)
def test_a_capacity_table_that_cannot_be_searched_is_one_line(tmp_path, table, needle):
    text = f'model = "m"\n[[phase]]\nname = "p"\n[slo]\nttft_ms = 100\n[capacity]\n{table}\n'
    with pytest.raises(SuiteError, match=needle):
        load_suite(str(write_suite(tmp_path, text)))
    with pytest.raises(CapacityError):
        CapacityPlan("rate", start=4, most=2)


def test_capacity_needs_an_slo_and_gating_it_needs_a_search(tmp_path):
    head = 'model = "m"\n[[phase]]\nname = "p"\n'
    with pytest.raises(SuiteError, match=r"\[capacity\] needs an \[slo\]"):
        load_suite(str(write_suite(tmp_path, head + "[capacity]\nstart = 2\n")))
    with pytest.raises(SuiteError, match=r"capacity_req_s needs a \[capacity\]"):
        load_suite(str(write_suite(tmp_path, head + "[gate]\ncapacity_req_s = 0.1\n")))
    tail = "[slo]\nttft_ms = 200\n[capacity]\nmax = 32\n[gate]\ncapacity_req_s = 0.1\n"
    suite = load_suite(str(write_suite(tmp_path, head + tail)))
    assert suite.capacity == CapacityPlan(most=32) and suite.gate == {"capacity_req_s": 0.1}


def test_a_sweep_of_a_suite_with_a_search_runs_only_its_levels(tmp_path):
    from harness.sweep.sweep import Sweep

    text = 'model = "m"\n[[phase]]\nname = "p"\n[slo]\nttft_ms = 100\n[capacity]\nstart = 2\n'
    suite = load_suite(str(write_suite(tmp_path, text)))
    for cold in ("round", "level"):
        units = Sweep(suite, "rate", [1.0, 2.0], cold=cold).units()
        assert all(u.capacity is None for u in units) and suite.capacity is not None


@pytest.mark.parametrize(
    "table, said",
    [
        ("max = 20000", "capacity.max must be at most 10000 req/s"),
        ('mode = "concurrency"\nmax = 100000', "capacity.max must be at most 4096 clients"),
        ('mode = "concurrency"\nstart = 1000000', "capacity needs 0 < start <= max"),
        ("budget_s = 5", "10 <= budget_s <= 3600"),
        ("steps = 500", "2 <= steps <= 50"),
    ],  # fmt: skip
)
def test_a_search_beyond_what_one_machine_can_run_is_refused(tmp_path, table, said):
    head = f'model = "m"\n[[phase]]\nname = "p"\n[slo]\nttft_ms = 200\n[capacity]\n{table}\n'
    with pytest.raises(SuiteError, match=re.escape(said)):
        load_suite(str(write_suite(tmp_path, head)))


def test_a_levels_requests_are_capped():
    assert default_requests(1e4, "rate") == MAX_REQUESTS == 4096
    assert default_requests(4096, "concurrency") == 4096
    assert default_requests(2, "rate") == 16
