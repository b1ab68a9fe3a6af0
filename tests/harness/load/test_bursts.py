"""Burst phases with `bursts` > 1: back-to-back bursts of fresh prompts, each sent only after the
previous burst ended, against a real server process (the scripted one), and fingerprinted."""

from __future__ import annotations

from harness.arms.arms import make_arm
from harness.runs.measure import draw_lengths, run_arm
from harness.workload.fingerprint import fingerprint, workload
from harness.workload.suite import load_suite

from helpers.arms import scripted
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "main"
arrival = "burst"
clients = 3
requests = 3
bursts = 4
prompt_tokens = 24
max_tokens = 3
"""


def test_bursts_fire_back_to_back_with_fresh_prompts(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    marker = unique_marker()
    cmd = scripted("--ttft-ms 300 --itl-ms 5", model=marker)
    run = run_arm(suite, make_arm(marker, serve_cmd=cmd), tmp_path / "s.log")
    assert not wait_no_survivors(marker)
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    reqs = run["requests"]
    assert [r["index"] for r in reqs] == list(range(12)) and all(r["ok"] for r in reqs)
    bursts = [reqs[i : i + 3] for i in range(0, 12, 3)]
    for prev, nxt in zip(bursts, bursts[1:], strict=False):
        assert min(r["send"] for r in nxt) >= max(r["end"] for r in prev)
        # one burst: sent one after another, they would be a TTFT (0.3 s) apart at least
        assert max(r["send"] for r in nxt) - min(r["send"] for r in nxt) < 0.3
    assert run["workload"]["phases"][0]["bursts"] == 4
    assert len(run["workload"]["phases"][0]["prompt_lengths"]) == 12


def test_bursts_enter_the_fingerprint_only_when_set(tmp_path):
    many = load_suite(str(write_suite(tmp_path, SUITE))).phases[0]
    one = load_suite(str(write_suite(tmp_path, SUITE.replace("bursts = 4", "")))).phases[0]
    facts = workload("m", [(one, draw_lengths(one))], None)
    assert "bursts" not in facts["phases"][0]  # one-burst workloads keep their fingerprints
    assert fingerprint(facts) != fingerprint(workload("m", [(many, draw_lengths(many))], None))
    assert many.total_requests == 12 and one.total_requests == 3
