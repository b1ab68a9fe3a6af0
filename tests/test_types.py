"""mypy over harness/ (pyproject.toml's [tool.mypy]) finds no error: a record's field read
under a wrong name, a frozen record assigned to, or a None passed where a value is wanted
fails here, not at run time."""

import subprocess
import sys

import pytest

from helpers import REPO


def test_mypy_finds_no_error_in_the_harness(tmp_path):
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Success: no issues found" in out.stdout
