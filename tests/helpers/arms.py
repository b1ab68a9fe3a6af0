"""The servers the harness tests measure: the scripted server as a --serve-cmd template, and
the reference engine of this working tree as an arm."""

from __future__ import annotations

import shlex

from helpers import REPO, SCRIPTED_SERVER


def scripted(*args: str, model: str = "scripted") -> str:
    """A --serve-cmd template that starts tests/helpers/scripted_server.py with `args` (by its
    absolute path: a command arm runs in the directory harness was started from)."""
    server = shlex.quote(str(SCRIPTED_SERVER))
    return f"{{python}} {server} --port {{port}} --model {model} " + " ".join(args)


def engine_arm(model: str, flags: str = ""):
    """The reference engine of this working tree, as this repository's servegate.toml says."""
    from harness.arms.arms import project_arm
    from harness.arms.project import find_project
    from harness.arms.worktrees import checkout

    return project_arm(find_project(REPO), checkout(REPO, "WORKTREE"), model, flags)


def described(label: str):
    """What an arm plan says of its arm when only its label matters."""
    from harness.results.ab_result import Arm

    return Arm(label=label, ref=None, cmd=None, flags=None, env=None)
