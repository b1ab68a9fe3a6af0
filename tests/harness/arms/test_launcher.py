"""The launcher against real processes: readiness, early exit, timeouts, and teardown that
leaves nothing behind, not even a process that left the server's (or a build's) group."""

from __future__ import annotations

import os
import sys

import pytest

from harness.arms import builds
from harness.arms.arms import make_arm
from harness.arms.launcher import Launcher, LaunchError

from helpers.arms import scripted
from helpers.processes import survivors, unique_marker, wait_no_survivors


def test_waits_through_loading_and_records_startup(tmp_path):
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--load-ms 400 --child", model=marker))
    launcher = Launcher(arm, tmp_path / "s.log")
    with launcher as server:
        assert server.startup_s >= 0.4
        assert server.ready_path == "/health" and server.health["status"] == "ok"
        assert server.health["model"] == marker
        assert len(survivors(marker)) == 2  # the server and its child
        assert launcher.exit_code() is None
    assert not wait_no_survivors(marker)
    log = (tmp_path / "s.log").read_text()
    assert log.startswith("$ ") and "scripted server on port" in log


def test_a_process_that_left_the_servers_group_and_tree_is_ended_too(tmp_path):
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--stray", model=marker))
    with Launcher(arm, tmp_path / "s.log") as server:
        (stray,) = [p for p in survivors(marker) if "scripted-stray" in p.cmdline()]
        assert stray.ppid() != server.pid and os.getsid(stray.pid) != server.pid
    assert not wait_no_survivors(marker)


def test_falls_back_to_v1_models_without_health(tmp_path):
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--no-health", model=marker))
    with Launcher(arm, tmp_path / "s.log") as server:
        assert server.ready_path == "/v1/models"
    assert not wait_no_survivors(marker)


def test_early_exit_is_reported_with_the_log_tail(tmp_path):
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--exit-at-start 3", model=marker))
    with pytest.raises(LaunchError, match="exited with code 3 before it was ready") as info:
        Launcher(arm, tmp_path / "s.log").__enter__()
    assert "exiting at start as asked" in info.value.log_tail


def test_timeout_stops_the_server(tmp_path):
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--load-ms 60000 --child", model=marker))
    with pytest.raises(LaunchError, match="not ready"):
        Launcher(arm, tmp_path / "s.log", timeout_s=1.0).__enter__()
    assert not wait_no_survivors(marker)


def test_exception_inside_the_block_still_tears_down(tmp_path):
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--child", model=marker))
    with pytest.raises(RuntimeError, match="boom"), Launcher(arm, tmp_path / "s.log"):
        assert survivors(marker)
        raise RuntimeError("boom")
    assert not wait_no_survivors(marker)


def test_a_missing_program_is_one_clear_error(tmp_path):
    arm = make_arm("m", serve_cmd="/nonexistent/server --port {port}")
    with pytest.raises(LaunchError, match="cannot start server '/nonexistent/server'"):
        Launcher(arm, tmp_path / "s.log").__enter__()


def test_a_start_under_way_is_reported_with_its_logs_last_line(tmp_path):
    """A minute-long start shows what it does: every 0.5 s, the seconds since launch and the
    last line its server wrote (the scripted server's last says what it is loading)."""
    marker = unique_marker()
    arm = make_arm(marker, serve_cmd=scripted("--load-ms 1600", model=marker))
    seen = []
    with Launcher(arm, tmp_path / "s.log", starting=lambda s, line: seen.append((s, line))):
        pass
    assert len(seen) >= 2 and [s for s, _ in seen] == sorted(s for s, _ in seen), seen
    assert seen[0][0] >= 0.5, seen  # not before the first half second
    assert seen[-1][1] == "loading: capturing CUDA graphs (1/1 s)", seen
    assert not wait_no_survivors(marker)


def test_what_a_build_leaves_running_is_ended_with_it(tmp_path):
    marker = unique_marker()
    leave = f"setsid {sys.executable} -c 'import time; time.sleep(300)' {marker} &"
    assert builds._run(f"{leave} true", tmp_path, tmp_path / "build.log") == 0
    assert not wait_no_survivors(marker)
