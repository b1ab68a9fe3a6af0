"""When a run is valid evidence: crashes, prompt failures, error rates and expectations."""

from __future__ import annotations

from harness.load.phase import PhaseResult
from harness.load.record import RequestRecord
from harness.runs.validity import judge
from harness.workload.expect import ExpectOutcome, parse_rule


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
