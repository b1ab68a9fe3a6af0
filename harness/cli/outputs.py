"""Output paths, checked before a run starts: a measurement must never be lost to a file or
folder that cannot be written (the check writes and removes a probe file, as root sees it too)."""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from harness.files import open_append
from harness.names import claim_dir


class OutputError(OSError):
    """An output path that cannot be written; the message is one line."""


def writable_dir(path: Path) -> Path:
    """`path` as a folder this process can create files in (made if missing)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".servegate-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"cannot write to {path}/: {exc.strerror or exc}") from None
    return path


def writable_file(path: Path) -> Path:
    """`path` as a file this process can write (its folder made if missing; content untouched)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    writable_dir(path.parent)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputError(f"cannot write {path}: not a regular file (a link, a FIFO, a device)")
    if path.exists():
        try:
            with open_append(path):
                pass
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def fresh_dir(parent: Path) -> Path:
    """parent/<UTC time>, else with -2, -3, ...: a folder of this invocation's own (its server
    logs and run records), made exclusively, so two started in the same second never share
    one."""
    try:
        return claim_dir(parent, datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    except OSError as exc:
        raise OutputError(f"cannot make a folder in {parent}/: {exc.strerror or exc}") from None


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one file (links and `..` resolved, hard links too)."""
    try:
        return Path(a).resolve() == Path(b).resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def checked_summary(path: Path, inputs: tuple[Path, ...] = ()) -> Path:
    """`--summary FILE` as a Markdown file to append to: not one of this verb's inputs and not
    a JSON file (a result would be corrupted by the Markdown appended to it)."""
    path = Path(path)
    if any(same_file(path, p) for p in inputs):
        raise OutputError(f"--summary {path} is one of the inputs: not appended to")
    head = b""
    if path.is_file():
        try:
            with path.open("rb") as f:
                head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() in (".json", ".gz") or head.startswith(b"{"):
        raise OutputError(
            f"--summary {path} is a JSON file: a summary is Markdown appended to a file; "
            "name a .md file"
        )
    return writable_file(path)
