"""More than one client process: requests dealt over worker processes with their own event
loops, records merged on one clock in request order; the same workload (records' shape and
fingerprint) with 1 or N processes; bursts still back to back; a conversation stays whole."""

from __future__ import annotations

import dataclasses

import pytest

from harness.arms.arms import make_arm
from harness.load.workers import split
from harness.runs.measure import run_arm
from harness.workload.suite import SuiteError, load_suite, override

from helpers.arms import scripted
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "main"
arrival = "burst"
clients = 5
requests = 5
bursts = 3
prompt_tokens = 16
max_tokens = 4

[[phase]]
name = "chat"
endpoint = "chat"
clients = 2
requests = 3
turns = 2
prompt_tokens = 16
max_tokens = 3
"""


def test_requests_and_clients_are_dealt_evenly():
    assert split(list(range(10, 15)), 5, 2) == [([10, 12, 14], 3), ([11, 13], 2)]
    assert split([0], 4, 3) == [([0], 2)]  # a process with nothing to send is not sent to
    assert split(list(range(4)), 1, 2) == [([0, 2], 1), ([1, 3], 1)]  # each at least one


def shape(run: dict) -> list[tuple]:
    keys = ("phase", "index", "turn", "prompt_tokens", "max_tokens", "ok", "client_tokens")
    return [tuple(r[k] for k in keys) for r in run["requests"]]


def test_two_client_processes_fire_the_same_workload(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--ttft-ms 30 --itl-ms 5", model=marker))
    one = run_arm(suite, arm, tmp_path / "one.log")
    two = run_arm(override(suite, client_procs=2), arm, tmp_path / "two.log")
    assert not wait_no_survivors(marker)
    for run in (one, two):  # valid, unless a loaded machine starved the client
        assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    assert shape(one) == shape(two) and one["fingerprint"] == two["fingerprint"]
    main = two["phases"]["main"]
    assert main["client"]["processes"] == 2 and one["phases"]["main"]["client"]["processes"] == 1
    assert main["client"]["tokens"] == 15 * 4
    reqs = [r for r in two["requests"] if r["phase"] == "main"]
    bursts = [reqs[i : i + 5] for i in range(0, 15, 5)]
    for prev, nxt in zip(bursts, bursts[1:], strict=False):  # still back to back
        assert min(r["send"] for r in nxt) >= max(r["end"] for r in prev)
    turns = [r for r in two["requests"] if r["phase"] == "chat"]
    assert [(r["index"], r["turn"]) for r in turns] == [(i, i % 2 + 1) for i in range(6)]
    for first, second in zip(turns[::2], turns[1::2], strict=True):  # each on one process,
        assert second["send"] >= first["end"]  # its turns in order on the one clock


def test_client_procs_is_checked_and_not_part_of_the_workload(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    assert dataclasses.replace(suite, client_procs=1) == suite
    assert override(suite, client_procs=3).phases == suite.phases
    for bad in ("0", "true", "2.5", "65"):
        with pytest.raises(SuiteError, match="client_procs"):
            load_suite(str(write_suite(tmp_path, f"client_procs = {bad}\n" + SUITE, "b.toml")))
    assert load_suite(str(write_suite(tmp_path, "client_procs = 4\n" + SUITE, "c.toml"))
                      ).client_procs == 4  # fmt: skip
