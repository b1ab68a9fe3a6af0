"""Where arms run and how long a job may take: the rules as pure functions (device rotation,
blocks of rounds, looks at whole blocks, the budget's arithmetic and its note) and the project
file's keys for them, each checked."""

from __future__ import annotations

import math
import time

import pytest

from harness.arms.arms import ArmError, make_arm
from harness.arms.project import ProjectError, parse_project
from harness.load.counters import parse_metrics
from harness.load.gauges import GaugeWatch, gauge_total
from harness.results.ab_result import Crash
from harness.results.comparison import MetricResult
from harness.results.metrics import Method
from harness.results.verdicts import Verdict
from harness.runs.ab import placement
from harness.runs.budget import Budget, budget_note
from harness.runs.plan import ArmPlan, placed_devices
from harness.stats.compare import blocked, compare_metric
from harness.stats.sequential import Schedule
from harness.workload.schema import SchemaError

from helpers.arms import described


def test_two_devices_swap_every_round_one_holds_all():
    names = ["base", "head"]
    first, second = {"base": "0", "head": "1"}, {"base": "1", "head": "0"}
    assert [placement(i, names, ("0", "1")) for i in range(3)] == [first, second, first]
    assert placement(5, names, ("7",)) == {"base": "7", "head": "7"}
    assert placement(0, names, ()) == {}
    three = [placement(i, names, ("a", "b", "c"))["base"] for i in range(3)]
    assert sorted(three) == ["a", "b", "c"]  # every arm visits every device once per cycle


def test_a_block_cancels_a_device_speed():
    base = [10.0, 12.0, 10.0, 12.0, 11.0]  # base on the fast device, then the slow, ...
    head = [12.0, 10.0, 12.0, 10.0]
    assert blocked(head, 2) == pytest.approx([math.sqrt(120)] * 2)
    assert blocked(base, 2) == blocked(base[:4], 2)  # a partial block is left out
    assert blocked(base, 1) == base
    m = compare_metric("tpot_ms", base[:4], head, 0.1, alpha=0.01, block=2)
    assert m.ratio == pytest.approx(1.0) and m.verdict == "PASS"
    unblocked = compare_metric("tpot_ms", base[:4], head, 0.1, alpha=0.01)
    assert unblocked.verdict == "INCONCLUSIVE"


def test_looks_fall_on_whole_blocks():
    assert Schedule.plan(3, 9, block=2).looks == (4, 6, 8, 10)
    assert Schedule.plan(3, 9).looks == (3, 5, 7, 9)
    assert Schedule.plan(1, 3, block=3).looks == (6,)  # two whole cycles at the least


def test_the_budget_counts_from_the_process_start_builds_included(monkeypatch):
    import psutil

    started = time.time() - 120  # two minutes of builds before the budget is read
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: started)
    left = Budget.from_start(10).left_s()
    assert 10 * 60 * 0.95 - 120 - 30 < left <= 10 * 60 * 0.95 - 120  # 30 s: far beyond the call


def compared(name: str, verdict: str, **fields) -> MetricResult:
    """A metric's comparison with only what a budget's note reads."""
    return MetricResult(name=name, verdict=Verdict(verdict), ratio=None, ci_low=None,
                        ci_high=None, tolerance=0.1, mde=fields.pop("mde", None),
                        method=Method.T, note=None, **fields)  # fmt: skip


def test_the_budget_fits_rounds_and_says_what_they_could_resolve():
    budget = Budget(3, time.monotonic() + 100)
    assert budget.rounds_that_fit([30]) == 3
    assert budget.rounds_that_fit([10, 45, 20]) == 2  # as long as the slowest round, not 10
    assert Budget(3, time.monotonic() - 1).rounds_that_fit([30]) == 0
    metrics = [
        compared("tpot_ms", "INCONCLUSIVE", detectable=1.234, mde=1.3),
        compared("ttft_p50_ms", "PASS", detectable=1.05),
    ]
    assert budget_note(3, 4, metrics) == (
        "the budget of 3 min ended after 4 round(s), before the gate decided; the smallest "
        "change they resolve: tpot_ms +23.4% (more minutes or a quieter machine resolve "
        "smaller changes)"
    )
    wide = [  # two rounds of a GPU check: t has one degree of freedom
        compared("ttft_p95_ms", "INCONCLUSIVE", mde=15.365),
        compared("tok_s", "INCONCLUSIVE", mde=0.0),
        compared("tpot_ms", "INCONCLUSIVE", detectable=0.6),
    ]
    assert "resolve: ttft_p95_ms none within 2x, tok_s none within 2x, tpot_ms -40.0% (" in (
        budget_note(1.4, 2, wide)
    )
    assert budget_note(3, 1, [compared("tpot_ms", "INCONCLUSIVE")]).endswith(
        "; too few rounds for an interval: no change is resolvable from them (more minutes "
        "or a quieter machine resolve smaller changes)"
    )


def test_gauges_sum_their_series_and_keep_the_peak():
    text = 'vllm:kv_bytes{gpu="0"} 10\nvllm:kv_bytes{gpu="1"} 5\nother 99\n'
    assert gauge_total(parse_metrics(text), ("vllm:kv_bytes",)) == 15
    assert gauge_total(parse_metrics("other 1\n"), ("vllm:kv_bytes",)) is None
    watch = GaugeWatch(None, ("vllm:kv_bytes",), scale=2.0)
    for value in (3, 7, 4):
        watch.take(parse_metrics(f"vllm:kv_bytes {value}\n"))
    assert watch.peak == 14 and watch.source == "server /metrics: vllm:kv_bytes x 2 bytes"


SERVE = {"serve": "srv --port {port} --gpu {device}"}


def test_the_project_file_places_and_times_its_server(tmp_path):
    path = tmp_path / "servegate.toml"
    p = parse_project({"server": SERVE | {"devices": [0, "1"], "ready_timeout": 600,
                       "device_memory": {"gauges": ["sglang:mem"], "scale": 1e9}},
                       "gate": {"budget_minutes": 25}}, path)  # fmt: skip
    assert (p.devices, p.ready_timeout, p.gauges, p.gauge_scale) == (
        ("0", "1"), 600.0, ("sglang:mem",), 1e9)  # fmt: skip
    assert (p.device_env, p.budget_minutes) == ("CUDA_VISIBLE_DEVICES", 25)
    for bad, message in (
        ({"devices": ["0", "0"]}, "a device is named twice"),
        ({"devices": ["0 1"]}, "'0 1' is not a device name"),
        ({"ready_timeout": 0}, "ready_timeout must be seconds"),
        ({"device_env": "A B"}, "is not a variable name"),
        ({"device_memory": {"gauge": ["x"]}}, "gauge"),
    ):
        with pytest.raises((ProjectError, SchemaError), match=message):
            parse_project({"server": SERVE | bad}, path)


def test_an_arm_on_a_device_sees_it_in_its_command_and_environment():
    arm = make_arm("m", serve_cmd="srv --port {port} --gpu {device}")
    assert arm.command(1)[-1] == "0" and arm.environment == {}
    placed = arm.__class__(**{**{f: getattr(arm, f) for f in arm.__slots__}, "device": "3"})
    assert placed.command(1)[-1] == "3" and placed.environment == {"CUDA_VISIBLE_DEVICES": "3"}


def test_a_group_of_devices_is_one_place_for_a_tensor_parallel_arm(tmp_path):
    p = parse_project({"server": SERVE | {"devices": ["0+1", "2+3"]}}, tmp_path / "s.toml")
    assert p.devices == ("0,1", "2,3")
    assert placement(1, ["base", "head"], p.devices) == {"base": "2,3", "head": "0,1"}
    for bad, message in (
        (["0+1", "1+2"], "a device is named twice"),
        (["0+1", "2"], r"groups of different sizes \(0\+1, 2\)"),
        (["0+"], "'' is not a device name"),
    ):
        with pytest.raises(ProjectError, match=message):
            parse_project({"server": SERVE | {"devices": bad}}, tmp_path / "s.toml")
    arm = make_arm("m", serve_cmd="srv --port {port} -tp 2 --gpus {devices} --first {device}")
    placed = arm.__class__(**{**{f: getattr(arm, f) for f in arm.__slots__}, "device": "2,3"})
    assert placed.command(1)[-4:] == ["--gpus", "2,3", "--first", "2"]
    assert placed.environment == {"CUDA_VISIBLE_DEVICES": "2,3"}
    plans = {n: ArmPlan(n, arm, described(n)) for n in ("base", "head", "null")}
    with pytest.raises(ArmError, match=r"devices 0\+1,2\+3: 3 arms"):
        placed_devices("0+1,2+3", None, plans)


def test_devices_must_cover_the_arms_that_run_at_once():
    arm = make_arm("m", serve_cmd="srv {port}")
    plans = {n: ArmPlan(n, arm, described(n)) for n in ("base", "head", "null")}
    assert placed_devices("0", None, plans) == ("0",)
    with pytest.raises(ArmError, match="3 arms .* give at least 3"):
        placed_devices("0,1", None, plans)
    with pytest.raises(ArmError, match="named twice"):
        placed_devices("0,0", None, plans)


def test_arms_measured_at_once_share_one_live_display(tmp_path):
    """Arms measured at the same time, from two threads, show as rows of the round's one
    display, each named by its arm."""
    import io

    from rich.console import Console

    from harness.report.display import LiveProgress
    from harness.runs.ab import ABRunner
    from harness.workload.suite import load_suite

    from helpers.fake_runs import measured_run

    def measure(suite, plan, log_dir, *, round_no, label, progress, **kw):
        with progress(label) as bar:
            bar.phase_started("load", 1)
            bar.request_done(None)
        return measured_run({"ttft_p50_ms": 10.0, "tok_s": 5.0}), None

    console = Console(file=io.StringIO(), force_terminal=True)
    arm = make_arm("m", serve_cmd="true {port}")
    plans = {n: ArmPlan(n, arm, described(n)) for n in ("base", "head")}
    runner = ABRunner(
        load_suite("smoke"), plans, tmp_path, 4, 4, measure=measure, devices=("0", "1"),
        progress=lambda label: LiveProgress(console, label),
    )  # fmt: skip
    result = runner.run().to_json()
    assert [r["devices"] for r in result["rounds"]][:2] == [
        {"base": "0", "head": "1"}, {"base": "1", "head": "0"}]  # fmt: skip
    shown = console.file.getvalue()
    assert "round 1/4 base (base) load" in shown and "round 1/4 head (head) load" in shown


def test_a_start_that_fails_before_any_run_is_the_whole_invalid(tmp_path):
    from harness.runs.ab import ABRunner
    from harness.workload.suite import load_suite

    def measure(suite, plan, log_dir, *, round_no, **kw):  # the first arm's start fails
        return None, Crash(arm=plan.name, round=round_no, message="out of memory")

    arm = make_arm("m", serve_cmd="true {port}")
    plans = {n: ArmPlan(n, arm, described(n)) for n in ("base", "head")}
    result = ABRunner(load_suite("smoke"), plans, tmp_path, 3, 3, measure=measure).run().to_json()
    assert result["comparison"]["invalid"] == ["arm base crashed in round 1: out of memory"]
    assert result["comparison"]["verdict"] == "INVALID"


def test_a_budget_holds_each_capacity_search_to_half_a_runs_share(tmp_path):
    from harness.runs.budget import search_within
    from harness.workload.suite import load_suite

    text = ('model = "m"\n[[phase]]\nname = "p"\n[slo]\nttft_ms = 100\n'
            "[capacity]\nbudget_s = 300\n")  # fmt: skip
    (tmp_path / "s.toml").write_text(text)
    suite = load_suite(str(tmp_path / "s.toml"))
    assert search_within(suite, None, 6) is suite
    assert search_within(suite, 10, 6).capacity.budget_s == 50  # 600 s / 6 runs / 2
    assert search_within(suite, 600, 6).capacity.budget_s == 300  # never beyond its own
    assert search_within(suite, 0.5, 6).capacity.budget_s == 10  # nor under 10 s
