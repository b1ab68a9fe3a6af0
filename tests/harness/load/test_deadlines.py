"""Deadlines: a server that streams past max_tokens, never sends a first token, or is too slow
for the phase ends the run INVALID (exit 2) in bounded time, naming what ran out, with no
process of it left behind."""

from __future__ import annotations

import json
import time

import pytest

from helpers.arms import scripted
from helpers.cli import harness
from helpers.processes import unique_marker, wait_no_survivors
from helpers.project_repo import ProjectRepo

DEADLINE_SUITE = """
model = "{model}"
[[phase]]
name = "load"
clients = 2
requests = 4
prompt_tokens = 8
max_tokens = 4
request_timeout_s = {request}
phase_timeout_s = {phase}
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("server", "request_s", "phase_s", "said"),
    [
        ("--endless --itl-ms 5", 30, 60, "stream too long: more than max_tokens (4) chunks"),
        ("--endless --itl-ms 5 --no-usage --finish stop", 30, 60, "stream too long"),
        ("--ttft-ms 300000", 3, 60, "request deadline (3 s) passed before the stream finished"),
        ("--ttft-ms 2500", 30, 4, "phase deadline (4 s) passed"),
    ],
    ids=["endless", "endless-bare", "first-token-after-minutes", "slow-phase"],
)
def test_servers_that_never_finish_end_the_run_invalid_in_bounded_time(
    tmp_path, server, request_s, phase_s, said
):
    marker = unique_marker()
    suite = tmp_path / "s.toml"
    suite.write_text(DEADLINE_SUITE.format(model=marker, request=request_s, phase=phase_s))
    started = time.monotonic()
    r = harness("run", "--quiet", "--suite", str(suite), "--out", str(tmp_path / "run.json"),
                "--serve-cmd", scripted(server, model=marker),
                cwd=tmp_path, timeout=240)  # fmt: skip
    took = time.monotonic() - started
    assert r.returncode == 2, r.stdout + r.stderr
    run = json.loads((tmp_path / "run.json").read_text())["runs"][0]
    assert not run["valid"] and any(said in why for why in run["invalid_reasons"]), run
    assert took < 2 * (request_s + phase_s) + 30, took
    assert not wait_no_survivors(marker)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("verb", ["ab", "sweep"])
def test_ab_and_sweep_against_an_endless_server_end_invalid_in_bounded_time(tmp_path, verb):
    marker = unique_marker()
    suite = tmp_path / "s.toml"
    suite.write_text(DEADLINE_SUITE.format(model=marker, request=2, phase=10))
    endless = scripted("--endless --itl-ms 5 --ttft-ms 100000", model=marker)
    arms = ["--base-cmd", endless, "--head-cmd", endless + " --tag b"]
    extra = (
        ["--rounds", "2", "--max-rounds", "2"]
        if verb == "ab"
        else ["--levels", "1", "--rounds", "1"]
    )
    started = time.monotonic()
    r = harness(verb, "--quiet", "--suite", str(suite), *arms, *extra,
                "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=480)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "request deadline (2 s) passed" in r.stdout, r.stdout
    assert time.monotonic() - started < 300  # 12-24 s loaded; its first token is 28 h away
    assert len(list((tmp_path / "out").glob("*.md"))) == 1
    assert not wait_no_survivors(marker)


@pytest.mark.timeout(300)
def test_sweep_against_a_server_that_dies_mid_stream_is_exit_2_with_its_log(tmp_path):
    marker = unique_marker()
    suite = tmp_path / "s.toml"
    suite.write_text(DEADLINE_SUITE.format(model=marker, request=30, phase=60))
    dies = scripted("--die-at 3", model=marker)
    r = harness("sweep", "--quiet", "--suite", str(suite),
                "--serve-cmd", dies, "--levels", "1,2", "--rounds", "1", "--requests", "4",
                "--out-dir", str(tmp_path / "out"), cwd=tmp_path, timeout=240)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "server log tail" in r.stdout and "Traceback" not in r.stdout + r.stderr
    assert len(list((tmp_path / "out").glob("*-sweep-*.md"))) == 1
    assert not wait_no_survivors(marker)


@pytest.mark.timeout(300)
def test_bisect_whose_bad_commit_never_becomes_ready_is_exit_2_in_bounded_time(tmp_path):
    marker = unique_marker()
    repo = ProjectRepo(tmp_path, marker)
    repo.commit("docs: a line", readme="a line")
    build = repo.path / "build.py"  # the bad commit's server answers 503 for ten minutes
    lazy = build.read_text().replace("--itl-ms\\n2\\n", "--itl-ms\\n2\\n--load-ms\\n600000\\n")
    assert lazy != build.read_text()
    build.write_text(lazy)
    repo.git("commit", "-qam", "server: load the weights lazily")
    started = time.monotonic()
    r = repo.harness("bisect", "--good", "main~2", "--suite", "suite.toml", "--quiet",
                     "--ready-timeout", "3", "--out-dir", str(tmp_path / "out"),
                     cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "not ready" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert time.monotonic() - started < 120
    assert not wait_no_survivors(marker)


def test_a_write_that_fails_leaves_the_old_file_and_no_debris(tmp_path):
    from harness.files import write_atomic

    path = tmp_path / "result.json"
    path.write_text('{"an": "earlier result"}')
    with pytest.raises(UnicodeEncodeError):  # stands for a full disk: the write fails midway
        write_atomic(path, '{"half": "\ud800"}')
    assert path.read_text() == '{"an": "earlier result"}'
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
