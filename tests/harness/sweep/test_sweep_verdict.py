"""The sweep's judgement on hand-made per-level rounds (harness/sweep/judgement.py): the first
regressing level, the knee moving, INVALID levels, and the one-arm exit codes."""

from harness.results.ab_result import Crash
from harness.results.sweep_result import LevelRound
from harness.sweep.judgement import NO_SEARCH, judge
from harness.sweep.knee import Slo

GATE = {"tok_s": 0.10, "ttft_p95_ms": 0.20}


def rec(tok: float, ttft: float, fp: str = "f", valid: bool = True) -> dict:
    summary = {"tok_s": tok, "ttft_p95_ms": ttft, "req_s": tok / 10}
    reasons = [] if valid else ["phase 'c4': all 16 requests failed"]
    return {"fingerprint": fp, "valid": valid, "invalid_reasons": reasons, "summary": summary,
            "counters": {"engine_decode_steps_total": 10.0}}  # fmt: skip


def rounds_of(level: dict[str, list[dict]]) -> dict[str, list[LevelRound]]:
    """Hand-made rounds as the sweep hands them to the judgement."""
    return {name: [LevelRound.from_json(r) for r in rounds] for name, rounds in level.items()}


def by_level(base: dict, head: dict | None, rounds: int = 3) -> dict:
    """base/head: level name -> (tok_s, ttft_p95_ms), repeated with 1% jitter per round."""
    out = {}
    for name in base:
        out[name] = []
        for i in range(rounds):
            j = 1 + 0.01 * (i - 1)
            rnd = {"round": i + 1, "null": None, "base": rec(base[name][0] * j, base[name][1] * j)}
            if head is not None:
                rnd["head"] = rec(head[name][0] * j, head[name][1] / j)
            out[name].append(rnd)
    return out


BASE = {"c1": (10, 50), "c2": (20, 50), "c4": (40, 55), "c8": (41, 200)}
HEAD = {"c1": (10, 50), "c2": (20, 50), "c4": (21, 150), "c8": (21, 400)}


def test_head_that_saturates_earlier_regresses_first_at_four_and_moves_the_knee():
    j = judge(rounds_of(by_level(BASE, HEAD)), [1, 2, 4, 8], ["base", "head"], GATE, 0, [])
    assert (j.verdict, j.exit_code, j.first_regression) == ("REGRESSION", 1, "c4")
    assert set(j.first_regression_metrics) == {"tok_s", "ttft_p95_ms"}
    assert j.knee == {"base": 4, "head": 2} and j.knee_moved
    assert j.levels["c1"].verdict == "PASS"
    assert j.curves["base"][0].counters == {"engine_decode_steps_total": 10.0}


def test_same_curves_pass_with_the_knee_unmoved():
    j = judge(rounds_of(by_level(BASE, BASE)), [1, 2, 4, 8], ["base", "head"], GATE, 0, [])
    assert (j.verdict, j.exit_code, j.first_regression) == ("PASS", 0, None)
    assert j.knee == {"base": 4, "head": 4} and not j.knee_moved


def test_an_invalid_level_makes_the_sweep_invalid_even_beside_a_regression():
    levels = by_level(BASE, HEAD)
    levels["c8"][0]["head"] = rec(21, 400, valid=False)
    j = judge(rounds_of(levels), [1, 2, 4, 8], ["base", "head"], GATE, 0, [])
    assert (j.verdict, j.exit_code) == ("INVALID", 2)
    assert any(line.startswith("c8: round 1 head: invalid") for line in j.invalid)


def test_a_level_no_run_reached_after_a_crash_is_invalid():
    levels = by_level(BASE, HEAD)
    levels["c8"] = []
    crash = Crash(arm="head", round=1, message="server exited with code -9 under load")
    j = judge(rounds_of(levels), [1, 2, 4, 8], ["base", "head"], GATE, 0, [], crash)
    assert j.exit_code == 2 and j.levels["c8"].invalid == ["no run reached this level"]


def test_one_arm_is_valid_or_invalid_and_reports_goodput():
    levels = {n: [{"round": r["round"], "arm": r["base"]} for r in rounds]
              for n, rounds in by_level(BASE, None).items()}  # fmt: skip
    slos = [Slo("ttft_p95_ms", 100)]
    j = judge(rounds_of(levels), [1, 2, 4, 8], ["arm"], GATE, 0, slos)
    assert (j.verdict, j.exit_code, j.knee, j.goodput) == (
        "VALID",
        0,
        {"arm": 4},
        {"arm": 4},
    )
    assert j.slo_met == {"arm": [True, True, True, False]}
    levels["c2"][1]["arm"] = rec(20, 50, valid=False)
    j = judge(rounds_of(levels), [1, 2, 4, 8], ["arm"], GATE, 0, slos)
    assert (j.verdict, j.exit_code) == ("INVALID", 2) and j.invalid[0].startswith("c2:")


def capacity(base: float, head: float | None, rounds: int = 3) -> list[LevelRound]:
    """Rounds of capacity searches (sweep.capacity_rounds' shape), 1% jitter per round."""

    def one(req_s: float) -> dict:
        tried = {"level": 8, "attained": 1.0, "met": True}
        found = {"capacity_req_s": req_s, "met_level": 8, "missed_level": 9, "levels": [tried] * 6}
        return {"fingerprint": "f", "valid": True, "invalid_reasons": [], "counters": {},
                "summary": {"capacity_req_s": req_s}, "capacity": found}  # fmt: skip

    out = []
    for i in range(rounds):
        j = 1 + 0.01 * (i - 1)
        rnd = {"round": i + 1, "null": None, "base": one(base * j)}
        if head is not None:
            rnd["head"] = one(head * j)
        out.append(LevelRound.from_json(rnd))
    return out


def test_a_lower_capacity_regresses_after_every_level_passed():
    j = judge(rounds_of(by_level(BASE, BASE)), [1, 2, 4, 8], ["base", "head"], GATE, 0, [],
              capacity=capacity(50, 37), capacity_tolerance=0.10)  # fmt: skip
    assert (j.verdict, j.exit_code) == ("REGRESSION", 1)
    assert j.first_regression == "capacity"
    assert j.first_regression_metrics == ["capacity_req_s"]
    assert j.levels["capacity"].metrics[0].tolerance == 0.10
    assert j.capacity["head"].capacity_req_s == 37
    assert j.capacity["base"].runs[0].to_json() == {
        "capacity_req_s": 49.5, "met_level": 8, "missed_level": 9, "levels": 6,
    }  # fmt: skip
    same = judge(rounds_of(by_level(BASE, BASE)), [1, 2, 4, 8], ["base", "head"], GATE, 0, [],
                 capacity=capacity(50, 50), capacity_tolerance=0.10)  # fmt: skip
    assert (same.verdict, same.levels["capacity"].verdict) == ("PASS", "PASS")


def test_a_search_asked_for_that_no_run_made_is_invalid():
    two = judge(rounds_of(by_level(BASE, BASE)), [1, 2, 4, 8], ["base", "head"], GATE, 0, [],
                capacity=[], capacity_tolerance=0.10)  # fmt: skip
    assert (two.verdict, two.exit_code) == ("INVALID", 2)
    assert any(line.startswith("capacity: no run searched") for line in two.invalid)
    one = judge(rounds_of(by_level(BASE, None)), [1, 2, 4, 8], ["base"], GATE, 0, [], capacity=[])
    assert (one.verdict, one.invalid) == ("INVALID", [f"capacity: {NO_SEARCH}"])
    fine = judge(rounds_of(by_level(BASE, None)), [1, 2, 4, 8], ["base"], GATE, 0, [],
                 capacity=capacity(50, None))  # fmt: skip
    assert fine.verdict == "VALID" and fine.capacity["base"].capacity_req_s == 50
