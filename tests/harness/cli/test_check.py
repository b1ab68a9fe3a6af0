"""`harness check` on the project file `harness init` wrote: a Python package (the scripted
server) and a FastAPI app are each built into a virtual environment of their own (the
dependencies their files ask for, from the runner's pip index), started, asked once and run
once cold, and the gate's plan is printed, exit 0; a server that exits at start is exit 2 with
its log's tail; no project file is one line."""

from __future__ import annotations

import pytest

from helpers.adopt_repos import fastapi_server, python_server
from helpers.cli import cli, one_line_error


def adopted(tmp_path, monkeypatch, make):
    monkeypatch.setenv("SERVEGATE_CACHE", str(tmp_path / "cache"))
    repo = make(tmp_path / "server")
    out = cli("init", cwd=repo)
    assert out.returncode == 0, out.stdout + out.stderr
    return repo


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return adopted(tmp_path, monkeypatch, python_server)


@pytest.mark.parametrize("make", [python_server, fastapi_server], ids=["package", "fastapi"])
def test_check_builds_asks_once_runs_once_and_prints_the_plan(tmp_path, monkeypatch, make):
    repo = adopted(tmp_path, monkeypatch, make)
    out = cli("check", "--suite", "suite.toml", "--quiet", cwd=repo)
    if out.returncode == 2 and "the client fell behind" in out.stderr:  # the machine's: again
        out = cli("check", "--suite", "suite.toml", "--quiet", cwd=repo)
    assert out.returncode == 0, out.stdout + out.stderr
    said = dict(line.split(": ", 1) for line in out.stdout.splitlines() if ": " in line)
    head = repo.joinpath(".git", "refs", "heads", "main").read_text()[:8]
    assert said[f"HEAD@{head}"].startswith("built in ")  # its own .venv
    assert (repo / ".venv").is_dir() is False  # in the commit's worktree, not the checkout
    assert said["request"].startswith("model ")
    assert " 16 token(s), the first after " in said["request"]
    assert said["arms"].startswith("base (the pull request's base) and head (HEAD)")
    assert said["suite"] == "suite"
    assert said["servers"] == "one-at-a-time"  # the file init wrote says so
    assert said["rounds"] == "3, up to 9 (looks at 3, 5, 7, 9)"
    assert said["one round"].endswith("(2 arms, one-at-a-time)")
    assert " at 3 rounds, " in said["gate"] and " at 9 (2 builds of " in said["gate"]
    assert "Traceback" not in out.stderr


def test_a_server_that_exits_at_start_is_exit_2_with_its_log_tail(repo):
    out = cli("check", "--suite", "suite.toml", "--quiet", "--flags", "--exit-at-start 3",
              cwd=repo)  # fmt: skip
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.splitlines()  # after the build's own line: the error, then the log's tail
    (error,) = [line for line in lines if line.startswith("error: ")]
    assert error.startswith("error: HEAD@") and "exited with code 3" in error
    assert "scripted server: exiting at start as asked" in lines  # the server log's tail
    assert "request:" not in out.stdout and "gate:" not in out.stdout


def test_no_project_file_is_one_line(repo):
    (repo / "servegate.toml").unlink()
    one_line_error(cli("check", cwd=repo), "harness init")
