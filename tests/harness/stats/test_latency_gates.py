"""Every latency is gateable under the run summary's own names: a scripted server whose every
token after the first is 1.3x slower, TTFT unchanged, is a REGRESSION named on ITL (exit 1);
a suite gating goodput must say its SLO; directions are known for each gateable key."""

from __future__ import annotations

import re

import pytest

from harness.results.metrics import GATEABLE, metric
from harness.workload.suite import SuiteError, load_suite

from helpers.arms import scripted
from helpers.cli import harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import SUITE, write_suite


def test_slower_tokens_after_the_first_are_a_regression_named_on_itl(tmp_path):
    # only TTFT and ITL gated: no other metric ends the rounds before ITL decides; the scripted
    # gaps (26 ms against 20) read 1.2-1.35x with any scheduling delay under 10 ms, against 10%
    marker = unique_marker()
    gate = "[gate]\nttft_p50_ms = 0.15\nitl_p50_ms = 0.1"
    suite = write_suite(
        tmp_path, SUITE.format(extra=gate).replace("max_tokens = 4", "max_tokens = 12")
    )
    base = scripted("--ttft-ms 60 --itl-ms 20 --bare-health", model=marker)
    head = scripted("--ttft-ms 60 --itl-ms 26 --bare-health", model=marker)  # 1.3x per token
    r = harness("ab", "--quiet", "--suite", str(suite), "--rounds", "3", "--max-rounds", "9",
                "--base-cmd", base, "--head-cmd", head,
                cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    said = re.search(r"^REGRESSION: itl_p50_ms (\d\.\d+)x", r.stdout, re.M)
    assert said and 1.2 <= float(said[1]) <= 1.35, r.stdout
    ttft = next(line for line in r.stdout.splitlines() if "│ ttft_p50_ms" in line)
    assert "REGRESSION" not in ttft, ttft  # the first token did not move


def test_goodput_needs_an_slo_and_limits_are_checked(tmp_path):
    with pytest.raises(SuiteError, match="goodput_req_s needs an \\[slo\\] table"):
        load_suite(str(write_suite(tmp_path, SUITE.format(extra="[gate]\ngoodput_req_s = 0.1"))))
    bad = "[slo]\nttft_ms = -1"
    with pytest.raises(SuiteError, match="slo.ttft_ms must be a number of milliseconds > 0"):
        load_suite(str(write_suite(tmp_path, SUITE.format(extra=bad), "b.toml")))
    ok = "[slo]\nttft_ms = 500\ntpot_ms = 50\n[gate]\ngoodput_req_s = 0.1\nitl_p95_ms = 0.2"
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(extra=ok), "c.toml")))
    assert suite.slo == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    assert suite.gate == {"goodput_req_s": 0.1, "itl_p95_ms": 0.2}


def test_every_gateable_key_has_a_direction():
    directions = {key: metric(key).lower_is_better for key in GATEABLE}
    assert not directions["goodput_req_s"] and not directions["tok_s"]
    assert directions["queue_p95_ms"] and directions["itl_p50_ms"] and directions["e2e_p95_ms"]


def test_a_latency_that_moved_without_a_gate_is_shown_not_judged():
    from harness.report.tables import moved_rows
    from harness.stats.compare import compare_rounds

    from helpers.fake_runs import make_rounds

    base = [100.0, 101.0, 99.0, 100.5, 100.2]
    rounds = make_rounds({"base": base, "head": [b * 1.01 for b in base]}, "ttft_p50_ms")
    for rnd in rounds:
        for arm, scale in (("base", 1.0), ("head", 1.3)):
            rnd[arm]["summary"] |= {"itl_p50_ms": 20.0 * scale * (1 + rnd["round"] / 1e3),
                                    "e2e_p50_ms": 500.0 + rnd["round"]}  # fmt: skip
    rows = moved_rows(compare_rounds(rounds, {"ttft_p50_ms": 0.1}))
    assert [r["name"] for r in rows] == ["itl_p50_ms"]  # e2e did not move; ttft is gated
    assert rows[0]["change"] == "+30.0%"


def test_the_prefill_storm_seed_is_a_trade_off_under_its_suites_gate():
    """The committed seed A/B of 2026-12-02 (TTFT p50 0.521x, headed IMPROVEMENT when its suite
    did not gate decode latency), judged again from its stored rounds under today's gate: TPOT
    3.85x is a REGRESSION that paid for the TTFT, exit 1."""
    from harness.report.headline import trade_off
    from harness.results.store import read_json
    from harness.stats.compare import compare_rounds
    from harness.stats.sequential import Schedule

    from helpers import REPO

    (seed,) = (REPO / "results" / "2026-12-02-prefill-storm").glob("*.json")
    saved = read_json(seed)
    assert saved["comparison"]["verdict"] == "IMPROVEMENT"  # as it was headed then
    gate, slack = load_suite("prefill-storm").gate, saved["memory_slack_bytes"]
    comp = compare_rounds(saved["rounds"], gate, slack, schedule=Schedule.plan(3, 9))
    verdicts = {m.name: m.verdict for m in comp.metrics}
    assert (comp.verdict, comp.exit_code) == ("REGRESSION", 1)
    assert verdicts["tpot_ms"] == "REGRESSION" and verdicts["ttft_p50_ms"] == "IMPROVEMENT"
    assert trade_off(comp) == "tpot_ms +285% paid for ttft_p50_ms 0.52x"
