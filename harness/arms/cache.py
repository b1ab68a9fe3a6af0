"""The cache of commit worktrees and their builds (worktrees.py, builds.py) as entries with a
size and a last use, and `harness gc`'s rule: remove what has not been used for a while, never
what a running harness holds, and nothing outside the cache (a link is never followed)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.arms.worktrees import RefError, _git, cache_dir, cache_root, lock_path


@dataclass(frozen=True, slots=True)
class Entry:
    sha: str
    paths: tuple[Path, ...]  # the worktree and its build files
    bytes: int
    last_used: float  # epoch seconds: the newest mtime among its paths

    def idle_days(self, now: float) -> float:
        return (now - self.last_used) / 86400


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink())


def linked_level(folder: Path) -> Path | None:
    """The first level under the cache's root, down to `folder`, that is a symbolic link
    (each checked with lstat), or None: gc removes nothing reached through a link."""
    root = cache_root()
    if not folder.is_relative_to(root):
        return folder if folder.is_symlink() else None
    path = root
    for part in folder.relative_to(root).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def entries(repo: Path) -> list[Entry]:
    """Every cached commit of `repo`: its worktree folder and `<sha>.build-*` files (none
    where a level of the cache down to its folder is a link)."""
    folder = cache_dir(repo)
    if linked_level(folder) is not None or not folder.is_dir():
        return []
    by_sha: dict[str, list[Path]] = {}
    for path in folder.iterdir():
        sha = path.name.split(".", 1)[0]
        if len(sha) == 40 and all(c in "0123456789abcdef" for c in sha):
            by_sha.setdefault(sha, []).append(path)
    return [
        Entry(
            sha,
            tuple(sorted(paths)),
            sum(_size(p) for p in paths),
            max(p.lstat().st_mtime for p in paths),
        )  # fmt: skip
        for sha, paths in sorted(by_sha.items())
    ]


def stale(all_entries: list[Entry], older_than_days: float, now: float | None = None) -> list:
    """The entries unused for longer than `older_than_days` (0: every one)."""
    now = time.time() if now is None else now
    return [e for e in all_entries if e.idle_days(now) >= older_than_days]


@contextlib.contextmanager
def claimed(entry: Entry, folder: Path) -> Iterator[bool]:
    """The entry's lock taken exclusively without waiting: True while held, False when a
    running harness holds the worktree (worktrees.hold). Its lock file is made if missing."""
    path = lock_path(folder / entry.sha)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    except OSError:  # a link or something else where the lock should be: not ours to judge
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def remove(repo: Path, entry: Entry) -> list[str]:
    """Remove one entry: its worktree through git (so the repository forgets it), then files.
    Only what lies in the cache itself goes: a symbolic link is unlinked as a link (never
    followed), and a folder is removed only as a real folder in the cache. Returns a line per
    path treated otherwise. Call it with the entry claimed (`claimed`)."""
    folder = cache_dir(repo)
    if linked_level(folder) is not None:  # resolved through a link, a user's folder would pass
        return [f"{folder}: reached through a symbolic link: nothing removed"]
    notes = []
    lock = lock_path(folder / entry.sha)
    for path in entry.paths:
        if path == lock:
            continue  # last: it is what keeps a harness from taking the worktree meanwhile
        if path.is_symlink():
            path.unlink()
            notes.append(f"{path.name}: a symbolic link: the link removed, not what it leads to")
        elif path.is_dir():
            if path.parent != folder:
                notes.append(f"{path.name}: not a folder in {folder}: left")
                continue
            try:
                _git(repo, "worktree", "remove", "--force", str(path))
            except RefError:
                shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    with contextlib.suppress(RefError):
        _git(repo, "worktree", "prune")
    return notes
