"""A server that dies under load, and a harness that is interrupted: clear failures, exit codes,
and no process left behind (checked with psutil)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import start_harness
from helpers.processes import survivors, unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "load"
clients = 4
requests = {requests}
prompt_tokens = 16
max_tokens = 8
"""


def test_server_killed_mid_phase_fails_clearly(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(requests=40))
    out = tmp_path / "run.json"
    cmd = scripted("--ttft-ms 20 --itl-ms 5 --die-at 6 --child", model=marker)
    proc = start_harness(
        "run",
        "--quiet",
        "--suite",
        str(suite),
        "--serve-cmd",
        cmd,
        "--out",
        str(out),
        cwd=REPO,
        merge_stderr=True,
    )
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, text
    assert "server exited with code -9 during phase 'load'" in text
    assert "server log tail" in text and "scripted server on port" in text
    assert "Traceback" not in text
    assert not wait_no_survivors(marker), "the server's child outlived the run"
    run = json.loads(out.read_text())["runs"][0]
    assert run["outcome"] == "crashed" and not run["valid"]
    assert run["server"]["exit_code"] == -9 and "scripted server" in run["server"]["log_tail"]
    assert run["summary"]["errors"] >= 1
    assert any("not sent" in r["error"] or "Error" in r["error"] for r in run["requests"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_harness_stops_its_server(tmp_path, sig):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(requests=400))
    cmd = scripted("--ttft-ms 100 --child", model=marker)
    proc = start_harness(
        "run",
        "--quiet",
        "--suite",
        str(suite),
        "--serve-cmd",
        cmd,
        "--out",
        str(tmp_path / "r.json"),
        cwd=REPO,
        merge_stderr=True,
    )
    deadline = time.monotonic() + 20
    while len(survivors(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(survivors(marker)) == 2, "the server and its child never came up"
    time.sleep(1.0)  # into the load phase
    proc.send_signal(sig)
    text, _ = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, text  # the shell's status for the signal
    assert "interrupted: the server was stopped" in text and "Traceback" not in text
    assert not wait_no_survivors(marker)
