"""The `engine` command on an install without the engine's dependencies (the harness alone):
one line naming what is missing and how to install it, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("missing", ["tokenizers", "numpy"])
def test_a_harness_only_install_says_how_to_get_the_engine(missing):
    code = (f"import sys; sys.modules[{missing!r}] = None\n"  # as if never installed
            "from engine.entry import main; sys.argv = ['engine', 'serve']; main()")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"needs {missing}" in line and "servegate[engine] @ git+https://" in line


def test_the_console_script_is_the_entry():
    import tomllib

    from helpers import REPO

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["engine"] == "engine.entry:main"
