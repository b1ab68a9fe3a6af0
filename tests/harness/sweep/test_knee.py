"""The knee and goodput rules at their boundaries (harness/sweep/knee.py), and the sweep's level
planning (harness/sweep/sweep.py): pure functions, no server."""

import pytest

from harness.results.run import Run
from harness.results.sweep_result import CurvePoint
from harness.sweep.knee import (
    KNEE_GAIN,
    Point,
    Slo,
    SloError,
    gain_per_doubling,
    goodput,
    knee,
    parse_slos,
)
from harness.sweep.sweep import Sweep, SweepError, level_runs, parse_levels
from harness.workload.levels import default_requests
from harness.workload.suite import load_suite


def curve(tok: list[float], ttft: list[float], levels=(1, 2, 4, 8, 16)) -> list[Point]:
    return [Point(v, t, f) for v, t, f in zip(levels, tok, ttft, strict=True)]


def test_saturating_curve_has_its_knee_where_throughput_flattens():
    pts = curve([10, 20, 40, 41, 40], [50, 50, 52, 110, 230])
    assert knee(pts) == 4


def test_gain_just_under_the_threshold_is_flat_and_just_over_is_not():
    under = 100 * (1 + KNEE_GAIN) - 0.01
    over = 100 * (1 + KNEE_GAIN) + 0.01
    assert knee(curve([50, 100, under], [10, 20, 30], (1, 2, 4))) == 2
    assert knee(curve([50, 100, over], [10, 20, 30], (1, 2, 4))) is None


def test_gain_is_scaled_per_doubling_for_uneven_steps():
    # 4 -> 16 is two doublings: 1.2x in total is ~9.5% per doubling, i.e. flat
    assert gain_per_doubling(Point(4, 100, 1), Point(16, 120, 2)) == pytest.approx(0.0954, abs=1e-3)
    assert knee(curve([50, 100, 120], [10, 20, 40], (2, 4, 16))) == 4


def test_no_knee_while_throughput_still_grows_at_the_top():
    assert knee(curve([10, 20, 40, 80, 160], [50, 51, 52, 53, 54])) is None


def test_flat_throughput_without_rising_latency_is_not_a_knee():
    # throughput stopped growing but TTFT did not rise: the bottleneck is not queueing here
    assert knee(curve([10, 20, 40, 40, 40], [50, 50, 52, 52, 51])) is None


def test_a_later_growth_spurt_moves_the_knee_up():
    # flat 2 -> 4 but growing again 4 -> 8: the knee is where it stays flat, at 8
    assert knee(curve([10, 20, 21, 40, 41], [5, 6, 7, 8, 30])) == 8


def test_saturated_from_the_first_level_has_the_knee_at_the_first_level():
    assert knee(curve([10, 10, 10], [100, 200, 400], (1, 2, 4))) == 1


def test_one_level_or_missing_values_give_no_knee():
    assert knee([Point(4, 10, 10)]) is None
    assert knee(curve([10, None, 10], [1, 2, 3], (1, 2, 4))) is None


def points(medians: list[dict]) -> list[CurvePoint]:
    return [CurvePoint(name=f"l{i}", level=2**i, rounds=1, valid=True, medians=m)
            for i, m in enumerate(medians)]  # fmt: skip


def test_goodput_is_the_highest_level_with_every_lower_level_meeting_the_slos():
    slos = [Slo("ttft_p95_ms", 2000)]
    medians = points([{"ttft_p95_ms": v} for v in (100, 900, 2000, 2001, 1500)])
    assert goodput([1, 2, 4, 8, 16], medians, slos) == 4  # 2000 meets "<= 2000"; 16 is noise


def test_goodput_none_when_the_lowest_level_misses_or_no_slo_is_given():
    medians = points([{"ttft_p95_ms": 3000, "tok_s": 5}, {"ttft_p95_ms": 100, "tok_s": 9}])
    assert goodput([1, 2], medians, [Slo("ttft_p95_ms", 2000)]) is None
    assert goodput([1, 2], medians, []) is None


def test_throughput_slo_is_a_floor_and_every_slo_must_hold():
    medians = points(
        [
            {"ttft_p95_ms": 10, "tok_s": 5},
            {"ttft_p95_ms": 20, "tok_s": 9},
            {"ttft_p95_ms": 3000, "tok_s": 20},
        ]
    )
    assert goodput([1, 2, 4], medians, [Slo("tok_s", 5)]) == 4
    assert goodput([1, 2, 4], medians, [Slo("tok_s", 5), Slo("ttft_p95_ms", 2000)]) == 2
    assert goodput([1, 2, 4], medians, [Slo("tok_s", 6)]) is None
    assert goodput([1, 2], points([{"ttft_p95_ms": None}, {}]), [Slo("ttft_p95_ms", 1)]) is None


def test_parse_slos_accepts_repeats_and_commas_and_names_the_mistake():
    known = {"ttft_p95_ms", "tok_s"}
    slos = parse_slos(["ttft_p95_ms=2000", "tok_s=10, ttft_p95_ms=1500"], known)
    assert [str(s) for s in slos] == ["ttft_p95_ms <= 2000", "tok_s >= 10", "ttft_p95_ms <= 1500"]
    for bad, match in (
        ("ttft=5", "METRIC one of"),
        ("tok_s", "METRIC=LIMIT"),
        ("tok_s=fast", "must be a number"),
    ):
        with pytest.raises(SloError, match=match):
            parse_slos([bad], known)


def test_levels_parse_sorted_and_reject_nonsense():
    assert parse_levels("8,1,2", "concurrency") == [1, 2, 8]
    assert parse_levels("0.5,2", "rate") == [0.5, 2.0]
    for text, mode in (
        ("1.5", "concurrency"),
        ("0", "concurrency"),
        ("-1", "rate"),
        ("a,b", "rate"),
        ("", "rate"),
        ("2,2", "concurrency"),
        ("inf", "rate"),
    ):
        with pytest.raises(SweepError):
            parse_levels(text, mode)


def test_each_level_gets_its_own_seed_and_enough_requests():
    suite = load_suite("sweep")
    plan = Sweep(suite, "concurrency", [1, 8])
    c1, c8 = plan.phase(1), plan.phase(8)
    assert (c1.name, c1.clients, c1.requests) == ("c1", 1, 16)
    assert (
        (c8.name, c8.clients, c8.requests)
        == ("c8", 8, default_requests(8, "concurrency"))
        == ("c8", 8, 32)
    )
    assert c1.seed != c8.seed and c1.max_tokens == suite.phases[0].max_tokens
    rates = Sweep(suite, "rate", [0.5, 4], requests=40)
    r4 = rates.phase(4)
    r4_said = (r4.name, r4.arrival.mode, r4.arrival.rate, r4.requests, r4.clients)
    assert r4_said == ("r4", "rate", 4.0, 40, 40)
    assert len(plan.units()) == 1 and len(plan.units()[0].phases) == 2
    assert [
        u.phases[0].name for u in Sweep(suite, "concurrency", [1, 8], cold="level").units()
    ] == ["c1", "c8"]


def test_a_reason_naming_another_level_does_not_invalidate_this_one():
    stats = {"ttft_p95_ms": 1.0}
    run = {
        "summary": {},
        "workload": {"model": "m", "phases": [{"name": "c1"}, {"name": "c2"}]},
        "phases": {n: {"stats": stats, "memory": {"peak_rss_bytes": 7}} for n in ("c1", "c2")},
        "invalid_reasons": ["phase 'c2': all 16 requests failed"],
        "counters": {"c1": {"x": 1.0}},
        "server": {"startup_s": 1.5},
    }
    levels = level_runs(Run.from_json(run), ["c1", "c2"])
    assert levels["c1"].valid and not levels["c2"].valid
    assert levels["c1"].summary["peak_rss_bytes"] == 7 and levels["c1"].counters == {"x": 1.0}
    assert levels["c1"].fingerprint != levels["c2"].fingerprint
