"""A phase's `settle_s`: requests sent in its first seconds load the server and stay in the run,
but the statistics, the summary and so the gate count only those sent after; a phase that was
all settling is INVALID. Against the scripted server (real HTTP, real process)."""

from __future__ import annotations

import pytest

from harness.arms.arms import make_arm
from harness.runs.measure import run_arm
from harness.workload.suite import SuiteError, load_suite

from helpers.arms import scripted
from helpers.cli import valid_unless_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "main"
arrival = "concurrency"
clients = 1
requests = 6
prompt_tokens = 8
max_tokens = 4
settle_s = {settle}
"""


@pytest.mark.parametrize("settle", [0.25, 1000])
def test_only_requests_sent_after_settle_s_are_measured(tmp_path, settle):
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(settle=settle))))
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--ttft-ms 40 --itl-ms 10", model=marker))
    run = run_arm(suite, arm, tmp_path / "s.log")
    assert not wait_no_survivors(marker)
    start = run["phases"]["main"]["window"][0]
    reqs = run["requests"]
    assert len(reqs) == 6 and all(r["ok"] for r in reqs)
    assert all(r["settling"] == (r["send"] < start + settle) for r in reqs)
    measured = [r for r in reqs if not r["settling"]]
    assert run["phases"]["main"]["stats"]["requests"] == len(measured)
    assert run["workload"]["phases"][0]["settle_s"] == settle
    if settle == 1000:  # every request settled: nothing to gate
        assert not run["valid"] and any("none measured" in x for x in run["invalid_reasons"])
        return
    # each request sleeps 70 ms on the server: 6 of them outlast 0.25 s on any machine
    assert 0 < len(measured) < 6 and reqs[0]["settling"]
    assert valid_unless_starved(run), run["invalid_reasons"]


@pytest.mark.parametrize(
    ("keys", "needle"),
    [
        ("settle_s = -1", "settle_s must be"),
        ('settle_s = 5\narrival = "burst"\nbursts = 2', "not bursts > 1"),
    ],  # fmt: skip
)
def test_settle_keys_that_cannot_be_followed_are_one_line(tmp_path, keys, needle):
    text = f'model = "m"\n[[phase]]\nname = "p"\n{keys}\n'
    with pytest.raises(SuiteError, match=needle):
        load_suite(str(write_suite(tmp_path, text)))
