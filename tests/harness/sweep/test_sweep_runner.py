"""The sweep's round loop over stubbed cold runs: with devices its servers run one at a time,
rotated over them every round; with a budget no round starts that would not end inside it,
and the result says how many rounds the budget held."""

from __future__ import annotations

from harness.arms.arms import make_arm
from harness.runs.budget import Budget
from harness.runs.plan import ArmPlan
from harness.sweep import sweep as sweep_module
from harness.sweep.sweep import Sweep, SweepRunner
from harness.workload.suite import load_suite

from helpers.arms import described


def runner(monkeypatch, seen: list, clock: list, **kw) -> SweepRunner:
    def measure(unit, plan, log_dir, round_no, **_):
        seen.append((round_no, plan.name, plan.arm.device))
        clock[0] += 10.0  # each cold run: 10 s of the budget
        return {"summary": {}, "valid": True}, None

    monkeypatch.setattr(sweep_module, "measure_cold", measure)
    arm = make_arm("m", serve_cmd="srv --port {port}")
    plans = {n: ArmPlan(n, arm, described(n)) for n in ("base", "head")}
    plan = Sweep(load_suite("sweep"), "concurrency", [1, 2], None, "round", None)
    return SweepRunner(plan, plans, **kw)


def test_servers_run_one_at_a_time_rotated_over_the_devices(monkeypatch, tmp_path):
    seen: list = []
    r = runner(monkeypatch, seen, [0.0], rounds=2, devices=("0", "1"), log_dir=tmp_path)
    out = r.run()
    assert len(out.runs) == 4 and out.budget_ended == ""
    assert seen == [(1, "base", "0"), (1, "head", "1"), (2, "head", "0"), (2, "base", "1")]


def test_a_budget_holds_the_rounds_that_end_inside_it(monkeypatch, tmp_path):
    clock = [0.0]

    class Clocked(Budget):  # the sweep's time as the stubbed runs spend it
        def left_s(self) -> float:
            return self.deadline - clock[0]

    seen: list = []
    # a round is 2 arms x 1 server each (cold = round): 20 s; 50 s holds two, not a third
    r = runner(monkeypatch, seen, clock, rounds=5, budget=Clocked(1.0, 50.0), log_dir=tmp_path)
    out = r.run()
    assert [s[0] for s in seen] == [1, 1, 2, 2]
    assert out.budget_ended == "the budget of 1 min held 2 of 5 rounds"
