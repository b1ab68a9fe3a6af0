"""Quick overrides: --clients, --requests, --prompt-tokens, --max-tokens and --rate replace the
suite's in every measured phase of `run` and `ab`, enter the fingerprint, and a value a phase
cannot take is one line naming the option."""

from __future__ import annotations

import json

import pytest

from harness.runs.measure import draw_lengths
from harness.workload.fingerprint import fingerprint, workload
from harness.workload.suite import SuiteError, load_suite, override

from helpers.arms import scripted
from helpers.cli import exit_agrees, harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import SUITE, write_suite


def fp(suite) -> str:
    return fingerprint(workload(suite.name, [(p, draw_lengths(p)) for p in suite.phases], None))


def test_override_replaces_every_measured_phase_and_moves_the_fingerprint(tmp_path):
    two = SUITE.format(extra='[[phase]]\nname = "second"\narrival = "burst"\nbursts = 2\n'
                             "requests = 3\nprefix_tokens = 2\nprompt_tokens = 8")  # fmt: skip
    suite = load_suite(str(write_suite(tmp_path, two)))
    assert override(suite) is suite
    quick = override(suite, clients=3, requests=5, prompt_tokens=12, max_tokens=2, rate=4.0)
    for p in quick.phases:
        assert (p.clients, p.requests, p.prompt_tokens.value, p.max_tokens) == (3, 5, 12, 2)
        assert (p.arrival.mode, p.arrival.rate, p.bursts) == ("rate", 4.0, 1)
    assert fp(quick) != fp(suite) and fp(override(suite, clients=3)) != fp(suite)
    with pytest.raises(SuiteError, match="^--prompt-tokens: phase 'second': prefix_tokens"):
        override(suite, prompt_tokens=2)  # not above the second phase's 2-token shared prefix


def test_harness_run_takes_the_overrides_into_its_run(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    r = harness("run", "--suite", str(suite), "--quiet", "--out", "run.json", "--clients", "3",
                "--requests", "7", "--max-tokens", "2", "--prompt-tokens", "9",
                "--serve-cmd", scripted("--ttft-ms 5 --bare-health", model=marker),
                cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
    saved = json.loads((tmp_path / "run.json").read_text())
    exit_agrees(r, saved)  # INVALID where a loaded machine starved the client
    (run,) = saved["runs"]
    (phase,) = run["workload"]["phases"]
    assert (phase["clients"], phase["requests"], phase["max_tokens"]) == (3, 7, 2)
    assert phase["prompt_lengths"] == [9] * 7
    assert len(run["requests"]) == 7
    bad = harness(
        "run",
        "--suite",
        str(suite),
        "--rate",
        "nan",
        "--dry-run",
        cwd=tmp_path,
        env=outside_git(tmp_path),
    )
    assert bad.returncode == 2 and "must be a finite rate > 0" in bad.stderr, bad.stderr
