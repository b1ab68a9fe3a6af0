"""ABRunner's round loop under the sequential rule, with the runs stubbed (the layer below,
run_arm, has its own tests): where it stops, what it records, and its constructor's shape."""

from __future__ import annotations

import numpy as np
import pytest

from harness.arms.arms import make_arm
from harness.runs.ab import ABRunner, ArmPlan
from harness.workload.suite import load_suite

from helpers.arms import described
from helpers.fake_runs import measured_run


class StubRunner(ABRunner):
    """Each run's metrics drawn from a seeded generator; head's TTFT scaled by `shift`."""

    shift: float = 1.0
    cv: float = 0.01

    def stub(self, suite, plan, log_dir, *, round_no, **kw):
        rnd, name = round_no, plan.name
        rng = self.rng
        speed = float(np.exp(self.cv * rng.standard_normal()))
        scale = self.shift if name == "head" else 1.0
        summary = {
            "ttft_p50_ms": 900.0 * scale * speed,
            "ttft_p95_ms": 1000.0 * scale * speed,
            "tok_s": 60.0 / speed,
            "peak_rss_bytes": 1.3e9,
            "peak_device_bytes": None,
        }
        self.calls.append((rnd, name))
        return measured_run(summary), None


def runner(tmp_path, shift: float, cv: float, seed: int = 0, **kw) -> StubRunner:
    suite = load_suite("short-concurrency")
    arm = make_arm("tiny", serve_cmd="true {port}")
    plans = {n: ArmPlan(n, arm, described(n)) for n in ("base", "head")}
    r = StubRunner(suite, plans, tmp_path, start_together=False, **kw)  # nothing to launch
    r.shift, r.cv, r.rng, r.calls = shift, cv, np.random.default_rng(seed), []
    r.measure = r.stub
    return r


def test_a_quiet_a_a_stops_at_the_first_look(tmp_path):
    r = runner(tmp_path, 1.0, 0.01)
    out = r.run().to_json()
    assert out["comparison"]["verdict"] == "PASS" and len(out["rounds"]) == 3
    assert out["schedule"] == {"looks": [3, 5, 7, 9], "alpha": 0.01}
    assert all(rnd["wall_s"] >= 0 for rnd in out["rounds"])
    assert [c[0] for c in r.calls] == [1, 1, 2, 2, 3, 3]  # ABBA order within rounds
    assert [rnd["order"] for rnd in out["rounds"]][:2] == [["base", "head"], ["head", "base"]]


def test_a_regression_stops_at_the_first_look_that_can_call_it(tmp_path):
    out = runner(tmp_path, 1.5, 0.03).run().to_json()
    comp = out["comparison"]
    assert comp["verdict"] == "REGRESSION" and len(out["rounds"]) in (3, 5, 7)  # not 9
    ttft = next(m for m in comp["metrics"] if m["name"] == "ttft_p50_ms")
    assert ttft["evidence_low"] > 1 and ttft["alpha"] < 0.01 / 3


def test_noise_beyond_the_tolerance_runs_to_the_cap(tmp_path):
    out = runner(tmp_path, 1.0, 0.5, seed=3).run().to_json()
    assert len(out["rounds"]) == 9 and out["comparison"]["verdict"] == "INCONCLUSIVE"


@pytest.mark.parametrize(("rounds", "cap", "looks"), [(5, 5, [5]), (4, 9, [4, 6, 8, 9])])
def test_positional_constructor_and_custom_schedules(tmp_path, rounds, cap, looks):
    # bisect calls ABRunner(suite, plans, log_dir, rounds_wanted, max_rounds, ready_timeout)
    r = runner(tmp_path, 1.0, 0.5, seed=1, rounds_wanted=rounds, max_rounds=cap)
    assert list(r.schedule.looks) == looks
    assert len(r.run().to_json()["rounds"]) in looks


def test_auto_moves_the_last_look_to_the_rounds_the_noise_needs(tmp_path):
    # 8% a run: at the suite's tolerances nine rounds leave a metric undecided
    fixed = runner(tmp_path / "fixed", 1.0, 0.08).run().to_json()
    said = []
    r = runner(tmp_path / "auto", 1.0, 0.08, extend_to=41)
    r.on_look = lambda comparison, upcoming, walls: said.append(comparison.schedule.looks[-1])
    auto = r.run().to_json()
    assert fixed["comparison"]["verdict"] == "INCONCLUSIVE" and len(fixed["rounds"]) == 9
    last = auto["schedule"]["looks"][-1]
    assert 9 < last <= 41 and said[-1] == last  # a look's line names the plan as moved
    assert auto["schedule"]["spent"][0] == pytest.approx(0.01 * (3 / 9) ** 2)
    assert auto["comparison"]["verdict"] == "PASS" and len(auto["rounds"]) > 9
