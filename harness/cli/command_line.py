"""This invocation as a shell line a report can show and anyone can rerun from a clone: paths
made relative, temporary outputs dropped, this interpreter written {python}."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path

import click


def harness_command(argv: list[str] | None = None) -> str:
    """This invocation as a shell line, for a report's Reproduce section (portable_command)."""
    ctx = click.get_current_context(silent=True)
    params = ctx.command.params if ctx else []
    flags = frozenset(o for p in params if getattr(p, "is_flag", False) for o in p.opts)
    argv = sys.argv[1:] if argv is None else argv
    temps = (tempfile.gettempdir(), *filter(None, [os.environ.get("RUNNER_TEMP")]))
    return portable_command(argv, Path.cwd(), sys.executable, temps, flags)


DROPPED_IF_TEMPORARY = ("--out-dir", "--summary")  # outputs: a temporary one is no one's


def portable_command(
    argv: list[str],
    cwd: Path,
    python: str,
    temp: str | tuple[str, ...],
    flags: frozenset[str] = frozenset(),
) -> str:
    """`harness ARGS` (`flags`: the options that take no value) as a line that means the same
    in any clone, run from the repository's root: absolute paths inside `cwd` made relative;
    an --out-dir or --summary in a temporary folder `temp` (the system's, and a CI runner's
    $RUNNER_TEMP), or an --out-dir that is the
    default results/, dropped; in a command template, this interpreter (`python`) written
    `{python}`, which names it there. The refs are pinned later, when the commits are known
    (report.summary.reproduce)."""

    def rel(value: str) -> str:
        path = Path(value)
        if path.is_absolute() and path.is_relative_to(cwd):
            return str(path.relative_to(cwd)) or "."
        return value

    def template(value: str) -> str:
        try:
            tokens = shlex.split(value)
        except ValueError:
            return value
        for token in dict.fromkeys(tokens):
            new = "{python}" if token in (python, str(Path(python).resolve())) else rel(token)
            value = value.replace(token, new) if new != token else value
        return value

    def dropped(key: str, value: str) -> bool:
        if key not in DROPPED_IF_TEMPORARY:
            return False
        path = Path(value)
        default = key == "--out-dir" and (cwd / path).resolve() == (cwd / "results").resolve()
        temps = (temp,) if isinstance(temp, str) else temp
        return default or (path.is_absolute() and any(path.is_relative_to(t) for t in temps))

    out, args = [], list(argv)
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if key and not eq and (key in flags or not args):
            out.append(arg)  # an option that takes no value
            continue
        if key and not eq:
            value = args.pop(0)
        if dropped(key, value):
            continue
        value = template(value) if key in TEMPLATES else rel(value)
        out += [f"{key}={value}"] if eq else [key, value] if key else [value]
    return "harness " + " ".join(shlex.quote(a) for a in out)


TEMPLATES = ("--serve-cmd", "--base-cmd", "--head-cmd")  # options whose value is a command
