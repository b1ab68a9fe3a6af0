"""When a run is valid evidence: crashes, prompt failures, error rates, expectations, and an
open loop that kept its schedule."""

from __future__ import annotations

from harness.arms.arms import make_arm
from harness.load.phase import PhaseResult
from harness.load.record import RequestRecord
from harness.runs.measure import run_arm
from harness.runs.validity import judge
from harness.workload.expect import ExpectOutcome, parse_rule
from harness.workload.suite import load_suite

from helpers.arms import scripted
from helpers.cli import valid_unless_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite


def phase(name: str, failed: int, total: int, expect=()) -> PhaseResult:
    records = []
    for i in range(total):
        r = RequestRecord(name, i, 8, 4, status=200 if i >= failed else 503)
        r.error = "" if i >= failed else "queue full"
        records.append(r)
    return PhaseResult(name, records, (0.0, 1.0), expect=list(expect))


def test_a_clean_run_is_valid():
    assert judge([phase("main", 0, 8)], None, None) == (True, [])


def test_error_rate_up_to_the_allowance_is_valid():
    assert judge([phase("main", 4, 8)], None, None)[0]  # 50 % is the default allowance
    valid, reasons = judge([phase("main", 5, 8)], None, None)
    assert not valid
    assert reasons == [
        "phase 'main': 5 of 8 requests failed (the suite allows 50%; first: queue full)"
    ]
    assert judge([phase("main", 8, 8)], None, None, {"main": 1.0})[0]  # an overload suite
    assert not judge([phase("main", 1, 8)], None, None, {"main": 0.0})[0]


def test_crash_prompt_failure_and_expectations_are_all_reported():
    rule = parse_rule("engine_decode_steps_total", ">0")
    failing = ExpectOutcome(rule, "fail", 0.0)
    skipped = ExpectOutcome(rule, "skipped", None, "series not exported by server")
    valid, reasons = judge([phase("a", 0, 2, [skipped]), phase("b", 0, 2, [failing])],
                           "prompts: no 8-token prompt", -9)  # fmt: skip
    assert not valid
    assert reasons == [
        "server exited with code -9 during phase 'b'",
        "prompts: no 8-token prompt",
        "phase 'b': expected engine_decode_steps_total > 0, delta was 0",
    ]


def test_nothing_ran_is_invalid():
    assert judge([], None, None) == (False, ["no phase ran"])


RATE = """
model = "scripted"
[[phase]]
name = "main"
arrival = "rate"
rate = 20
requests = 12
prompt_tokens = 8
max_tokens = 2
{clients}
"""


def test_an_open_loop_that_cannot_keep_its_rate_is_invalid_naming_the_client(tmp_path):
    # 20 req/s against 300 ms requests: one slot serves 3 a second, so sends fall seconds
    # behind their due times; with a slot for each (the default) every one goes out when due
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--ttft-ms 300", model=marker))
    one = load_suite(str(write_suite(tmp_path, RATE.format(clients="clients = 1"), "one.toml")))
    run = run_arm(one, arm, tmp_path / "one.log")
    assert not run["valid"]
    (late,) = [why for why in run["invalid_reasons"] if "schedule" in why]
    assert late.startswith("phase 'main': the client fell behind its schedule: p99 send lateness")
    assert "max_lateness_ms" in late and "more clients" in late
    slots = load_suite(str(write_suite(tmp_path, RATE.format(clients=""), "slots.toml")))
    assert slots.phases[0].clients == 12
    run = run_arm(slots, arm, tmp_path / "slots.log")
    assert not wait_no_survivors(marker)
    assert valid_unless_starved(run), run["invalid_reasons"]
