"""Output paths, checked before a run starts: a measurement must never be lost to a file or
folder that cannot be written (the check writes and removes a probe file, as root sees it too)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
    if path.exists():
        try:
            with path.open("a"):
                pass
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
