"""What the tests share (imported as `helpers.*`: pyproject puts tests/ on pytest's path).

cli: the harness's command line, run as a real process or in this one; suites: the scripted
suite and write_suite; arms: --serve-cmd templates for the scripted server and the engine;
processes: unique markers and the processes a run left behind; throwaway_repo, project_repo,
hostile_repo, history_repo: git repositories with seeded history; fake_runs, gate_sim: run
records and whole gates without a server; engine_server, model_files, marks: the engine's
tests' server process, model files and skip marks. scripted_server.py is a program (run as a
subprocess), not imported."""

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout these tests belong to
SCRIPTED_SERVER = Path(__file__).resolve().parent / "scripted_server.py"


def git(cwd: Path, *args: str) -> str:
    """`git ARGS` in `cwd` as a fixed test author; its output, stripped (fails on an error)."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
