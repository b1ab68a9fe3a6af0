"""A capacity search against a real server with a known limit: the scripted server serves at
most N streams at once, each 150 ms, so in closed loop N clients meet a 150 ms TTFT limit and
N + 1 do not (a queued request waits a whole service, 150 ms more); the search ends on the
bracket [N, N + 1] and an A/B of N = 8 against N = 6 is a REGRESSION on capacity_req_s."""

from __future__ import annotations

import pytest

from harness.arms.arms import make_arm
from harness.runs.measure import run_arm
from harness.workload.suite import load_suite

from helpers.arms import scripted
from helpers.cli import cli, saved_result, valid_attempt
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "main"
arrival = "concurrency"
clients = 2
requests = 8
prompt_tokens = 8
max_tokens = 6

[slo]
ttft_ms = 150

[capacity]
mode = "concurrency"
start = 1
max = 32
{gate}
"""
SERVICE = "--ttft-ms 50 --itl-ms 20"  # 50 + 5 x 20 = 150 ms a request


@pytest.mark.timing  # a 100 ms margin each side of the limit, on real time
def test_the_search_finds_the_servers_stream_limit(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(gate=""))))
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted(f"{SERVICE} --max-streams 4", model=marker))

    def attempt(n: int):
        run = run_arm(suite, arm, tmp_path / f"s{n}.log")
        return run, {"runs": [run]}

    run, _ = valid_attempt(attempt)
    assert not wait_no_survivors(marker)
    assert run["valid"], run["invalid_reasons"]
    found = run["capacity"]
    assert [lv["level"] for lv in found["levels"]] == [1, 2, 4, 8, 6, 5]
    assert (found["met_level"], found["missed_level"]) == (4, 5)
    assert [lv["met"] for lv in found["levels"]] == [True, True, True, False, False, False]
    assert run["summary"]["capacity_req_s"] == found["capacity_req_s"] > 0
    assert list(run["phases"]) == ["main"]  # the search's levels are not the suite's phases
    assert all(r["phase"] == "main" for r in run["requests"])


@pytest.mark.timing
def test_an_ab_of_eight_streams_against_six_regresses_on_capacity(tmp_path):
    suite = write_suite(tmp_path, SUITE.format(gate="[gate]\ncapacity_req_s = 0.10"))
    marker = unique_marker()
    base, head = (scripted(f"{SERVICE} --max-streams {n}", model=marker) for n in (8, 6))

    def attempt(n: int):
        folder = tmp_path / f"out{n}"
        out = cli("ab", "--quiet", "--suite", str(suite), "--base-cmd", base, "--head-cmd", head,
                  "--rounds", "3", "--max-rounds", "3", "--out-dir", str(folder),
                  cwd=tmp_path)  # fmt: skip
        return out, saved_result(folder)

    out, _ = valid_attempt(attempt)
    assert not wait_no_survivors(marker)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "capacity_req_s" in out.stdout and "REGRESSION" in out.stdout


def test_a_search_nothing_meets_stops_at_its_time_budget(tmp_path):
    # 1 ms to the first token: no level meets it, so the rate search halves its way down
    # through ever longer levels (16 requests at 0.5, 0.25, ... req/s); the budget ends it.
    text = SUITE.format(gate="").replace("ttft_ms = 150", "ttft_ms = 1")
    text = text.replace('mode = "concurrency"\nstart = 1\nmax = 32', 'mode = "rate"\nstart = 4\n'
                        "max = 64\nbudget_s = 10")  # fmt: skip
    suite = load_suite(str(write_suite(tmp_path, text)))
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted(SERVICE, model=marker))
    run = run_arm(suite, arm, tmp_path / "s.log")
    assert not wait_no_survivors(marker)
    found = run["capacity"]
    assert found["stopped"] == "its time budget (10 s) was spent"
    assert found["met_level"] is None and found["capacity_req_s"] is None
    assert [lv["level"] for lv in found["levels"]][:2] == [4, 2]  # halving, each one kept
    assert all(not lv["met"] for lv in found["levels"])
