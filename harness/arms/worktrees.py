"""Git-ref arms: each commit checked out once as a detached worktree in a cache keyed by sha,
reused across runs; the user's working tree is never touched."""

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

WORKING_TREE = ("WORKTREE", ".")  # --head names the working tree itself (uncommitted changes)


class RefError(ValueError):
    """A ref that cannot be resolved or checked out; the message is one line."""


def _git(repo: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    except OSError as exc:
        raise RefError(f"git {' '.join(args)}: cannot run git: {exc.strerror}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["failed"])[-1]
        raise RefError(f"git {' '.join(args)}: {last}")
    return out.stdout.strip()


def cache_root() -> Path:
    """$SERVEGATE_CACHE, else $XDG_CACHE_HOME/servegate, else ~/.cache/servegate."""
    if env := os.environ.get("SERVEGATE_CACHE"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "servegate"


@dataclass(frozen=True)
class Checkout:
    ref: str  # as the user wrote it
    commit: str  # full sha (HEAD's for the working tree)
    path: Path  # where the arm's code is served from
    dirty: bool = False  # the working tree with uncommitted changes

    @property
    def label(self) -> str:
        named = self.ref if not self.commit.startswith(self.ref) else ""
        return f"{named}@{self.commit[:8]}".lstrip("@") + ("+dirty" if self.dirty else "")


def repo_root(start: Path) -> Path:
    try:
        return Path(_git(start, "rev-parse", "--show-toplevel"))
    except RefError as exc:
        raise RefError(
            f"{exc}: an arm served from a git ref (--base/--head, the default) needs the "
            "repository; run inside it, or give both arms as --base-cmd/--head-cmd"
        ) from None


def resolve(repo: Path, ref: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RefError:
        raise RefError(f"unknown git ref {ref!r} in {repo}") from None


def checkout(repo: Path, ref: str) -> Checkout:
    """The worktree for ref (created on first use), or the working tree itself."""
    if ref in WORKING_TREE:
        dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
        return Checkout(ref, resolve(repo, "HEAD"), repo, dirty)
    sha = resolve(repo, ref)
    repo_key = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    path = cache_root() / "worktrees" / repo_key / sha
    if path.exists():
        try:
            if _git(path, "rev-parse", "HEAD") == sha:
                return Checkout(ref, sha, path)
        except RefError:
            pass
        _git(repo, "worktree", "remove", "--force", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "prune")
    _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
    return Checkout(ref, sha, path)


def isolated_python(co: Checkout) -> Path:
    """A virtual environment built by the checkout's own install script (cached per sha)."""
    python = co.path / ".venv" / "bin" / "python"
    if not python.exists():
        script = co.path / "scripts" / "install.sh"
        if not script.exists():
            raise RefError(f"{co.label}: no scripts/install.sh to build an isolated environment")
        out = subprocess.run(["sh", str(script)], capture_output=True, text=True)
        if out.returncode != 0:
            tail = (out.stdout + out.stderr).strip().splitlines()[-3:]
            raise RefError(f"{co.label}: install failed: {' | '.join(tail)}")
    return python
