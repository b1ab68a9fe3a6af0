"""The shell's status for a signal, even when the interrupt escaped the exec of a string before
it was caught (dataclasses and namedtuple build their methods so while a module is imported):
CPython remembers such an interrupt as unhandled and, under `python -m`, ends the process by
SIGINT after its exit handlers, whatever code `sys.exit` was given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CAUGHT = """
import sys
{use}
try:
    exec("raise KeyboardInterrupt")
except KeyboardInterrupt:
    sys.exit({code})
"""


def run_module(tmp_path: Path, use: str, code: str) -> int:
    (tmp_path / "caught.py").write_text(CAUGHT.format(use=use, code=code))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "caught"], cwd=tmp_path, env=env).returncode


def test_python_itself_turns_a_caught_interrupt_from_an_exec_into_sigint(tmp_path):
    assert run_module(tmp_path, "", "130") == -signal.SIGINT  # what the harness must undo


def test_the_harness_exits_130_after_an_interrupt_caught_from_an_exec(tmp_path):
    use = "from harness.cli import signals"
    assert run_module(tmp_path, use, "signals.exit_code()") == 128 + signal.SIGINT
