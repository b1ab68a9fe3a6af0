"""Names for the files and folders a verb picks itself (a run's JSON, a report, an A/B's logs):
each is claimed by creating it exclusively (O_EXCL, mkdir), so two harnesses started in the same
second never write to the same name and nothing already there is replaced."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

TRIES = 1000


def _candidates(stems: Iterable[str]) -> Iterator[str]:
    """The given stems in order, then the last one with -2, -3, ..."""
    last = ""
    for stem in stems:
        last = stem
        yield stem
    for n in range(2, TRIES):
        yield f"{last}-{n}"


def claim_file(folder: Path, stems: Iterable[str], suffix: str, beside: tuple = ()) -> Path:
    """folder/<stem><suffix> for the first stem (then the last with -2, -3, ...) under which
    neither it nor any of `beside` (suffixes of its companion files) exists: created empty and
    exclusively, so it is this process's to write (and to remove if it never is: `release`)."""
    folder = Path(folder)
    for stem in _candidates(stems):
        if any((folder / f"{stem}{s}").exists() for s in beside):
            continue
        path = folder / f"{stem}{suffix}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free name for {next(iter(stems), '')}{suffix} in {folder}")


def claim_dir(parent: Path, name: str) -> Path:
    """parent/<name>, else <name>-2, -3, ...: made exclusively (its parents as needed)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for stem in _candidates([name]):
        try:
            (parent / stem).mkdir()
        except FileExistsError:
            continue
        return parent / stem
    raise FileExistsError(f"no free name for {name} in {parent}")


def release(path: Path) -> None:
    """Remove a file claimed by claim_file that was never written (still empty)."""
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()
