"""Suites written on the fly: the scripted server's small load phase (SUITE, `{extra}` for a
gate or more phases) and write_suite. A suite whose numbers a test depends on stays in it."""

from __future__ import annotations

from pathlib import Path

SUITE = """
model = "scripted"
[[phase]]
name = "load"
clients = 2
requests = 6
prompt_tokens = 8
max_tokens = 4
{extra}
"""


def write_suite(tmp_path: Path, text: str, name: str = "t.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path
