"""Git-ref arms: each commit checked out once as a detached worktree in a cache keyed by sha,
reused across runs; the user's working tree is never touched."""

import contextlib
import fcntl
import hashlib
import os
import subprocess
from collections.abc import Iterator
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


def cache_dir(repo: Path) -> Path:
    """This repository's folder in the cache: its worktrees and build logs, one per sha."""
    key = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    return cache_root() / "worktrees" / key


@dataclass(frozen=True)
class Checkout:
    ref: str  # as the user wrote it
    commit: str  # full sha (HEAD's for the working tree)
    path: Path  # where the arm's code is served from
    dirty: bool = False  # the working tree with uncommitted changes
    repo: Path | None = None  # the repository it was checked out of

    @property
    def is_working_tree(self) -> bool:
        return self.repo is not None and self.path == self.repo

    @property
    def label(self) -> str:
        named = self.ref if not self.commit.startswith(self.ref) else ""
        return f"{named}@{self.commit[:8]}".lstrip("@") + ("+dirty" if self.dirty else "")


def commit_facts(repo: Path, sha: str) -> dict:
    """What a history of commits needs to place and name one: its committer date, subject and
    depth (commits on its first-parent chain: it orders main's commits even within a second)."""
    try:
        date, _, subject = _git(repo, "log", "-1", "--format=%cI%x00%s", sha).partition("\0")
        depth = int(_git(repo, "rev-list", "--count", "--first-parent", sha))
    except (RefError, ValueError):
        return {"date": None, "subject": None, "depth": None}
    return {"date": date, "subject": subject, "depth": depth}


def repo_root(start: Path) -> Path:
    try:
        return Path(_git(start, "rev-parse", "--show-toplevel"))
    except RefError as exc:
        raise RefError(
            f"{exc}: an arm served from a git ref (the default) needs the repository; run "
            "inside it, or give each arm as a command (--serve-cmd, --base-cmd, --head-cmd) "
            "or a URL (--url, --base-url, --head-url)"
        ) from None


def resolve(repo: Path, ref: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RefError:
        raise RefError(f"unknown git ref {ref!r} in {repo}") from None


_HELD: dict[Path, int] = {}  # lock file -> its descriptor, held until this process exits


def lock_path(worktree: Path) -> Path:
    """The lock file beside a cached worktree: shared while an arm uses it, exclusive while
    `harness gc` removes it."""
    return worktree.with_name(worktree.name + ".lock")


def hold(worktree: Path) -> None:
    """Hold `worktree`'s lock shared for the rest of this process (the life of its arms), so
    that `harness gc` never removes a worktree a build or a server is using. Waits while gc is
    removing it; a lock file gc unlinked meanwhile is opened afresh."""
    path = lock_path(worktree)
    if path in _HELD:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            _HELD[path] = fd
            return
        os.close(fd)


def planned(repo: Path, ref: str) -> Checkout:
    """What checkout would give for ref, read from git alone (`rev-parse`, a status that takes
    no lock): nothing is checked out, created or locked. For --dry-run."""
    if ref in WORKING_TREE:
        status = _git(repo, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no")
        return Checkout(ref, resolve(repo, "HEAD"), repo, bool(status), repo)
    sha = resolve(repo, ref)
    return Checkout(ref, sha, cache_dir(repo) / sha, repo=repo)


def checkout(repo: Path, ref: str) -> Checkout:
    """The worktree for ref (created on first use), or the working tree itself. A cached
    worktree is held (hold) before it is looked at, and from then on by this process."""
    if ref in WORKING_TREE:
        dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
        return Checkout(ref, resolve(repo, "HEAD"), repo, dirty, repo)
    sha = resolve(repo, ref)
    path = cache_dir(repo) / sha
    hold(path)
    with _one_at_a_time(repo):
        return _made(repo, ref, sha, path)


@contextlib.contextmanager
def _one_at_a_time(repo: Path) -> Iterator[None]:
    """Worktrees of one repository are made one at a time: two harnesses (a CI matrix on one
    runner, parallel tests) checking out the same commit would both add it, and a `git
    worktree prune` would remove the other's half-made one."""
    path = cache_dir(repo) / ".checkout.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _made(repo: Path, ref: str, sha: str, path: Path) -> Checkout:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        # not a worktree the cache made (a link may lead to anyone's files): the entry alone
        # goes, never what it points to
        path.unlink()
    if path.exists():
        try:
            if _git(path, "rev-parse", "HEAD") == sha:
                os.utime(path)  # its last use: what `harness gc` goes by
                return Checkout(ref, sha, path, repo=repo)
        except RefError:
            if not _registered(repo, path):
                reattach(repo, path, sha)
                return Checkout(ref, sha, path, repo=repo)
        _git(repo, "worktree", "remove", "--force", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "prune")
    _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
    return Checkout(ref, sha, path, repo=repo)


def _registered(repo: Path, path: Path) -> bool:
    listed = _git(repo, "worktree", "list", "--porcelain").splitlines()
    return f"worktree {path.resolve()}" in listed


def reattach(repo: Path, path: Path, sha: str) -> None:
    """A cached worktree this clone does not know (a CI cache restored into a new clone) made
    one of its worktrees again, at `sha`, keeping its untracked files (what a build left): a
    commit's build is reused, not redone. Tracked files are set to the commit's; git rewrites
    only those whose content differs."""
    kept = path.with_name(path.name + ".restored")
    path.rename(kept)
    _git(repo, "worktree", "prune")
    _git(repo, "worktree", "add", "--detach", "--no-checkout", "--force", str(path), sha)
    (kept / ".git").unlink(missing_ok=True)
    (path / ".git").rename(kept / ".git")
    path.rmdir()
    kept.rename(path)
    _git(path, "reset", "-q")  # the index from the commit, no file written
    subprocess.run(["git", "-C", str(path), "update-index", "-q", "--refresh"], capture_output=True)
    _git(path, "reset", "-q", "--hard")
