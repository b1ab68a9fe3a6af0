"""The cache of commit worktrees and their builds (worktrees.py, builds.py) as entries with a
size and a last use, and `harness gc`'s rule: remove what has not been used for a while."""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from harness.arms.worktrees import RefError, _git, cache_dir


@dataclass(frozen=True, slots=True)
class Entry:
    sha: str
    paths: tuple[Path, ...]  # the worktree and its build files
    bytes: int
    last_used: float  # epoch seconds: the newest mtime among its paths

    def idle_days(self, now: float) -> float:
        return (now - self.last_used) / 86400


def _size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink())


def entries(repo: Path) -> list[Entry]:
    """Every cached commit of `repo`: its worktree folder and `<sha>.build-*` files."""
    folder = cache_dir(repo)
    if not folder.is_dir():
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


def remove(repo: Path, entry: Entry) -> None:
    """Remove one entry: its worktree through git (so the repository forgets it), then files."""
    for path in entry.paths:
        if path.is_dir():
            try:
                _git(repo, "worktree", "remove", "--force", str(path))
            except RefError:
                shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
    with contextlib.suppress(RefError):
        _git(repo, "worktree", "prune")
