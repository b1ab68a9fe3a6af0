"""The commits `harness bisect` searches: bad's first-parent chain back to good, oldest first,
with subjects. A merge on that chain is one candidate (its whole branch at once)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.arms.worktrees import RefError, _git, resolve


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    merge: bool = False

    @property
    def short(self) -> str:
        return self.sha[:10]


def commit_info(repo: Path, ref: str) -> Commit:
    sha = resolve(repo, ref)
    parents, _, subject = _git(repo, "log", "-1", "--format=%P%x00%s", sha).partition("\0")
    return Commit(sha, subject, len(parents.split()) > 1)


def first_parent_commits(repo: Path, good: str, bad: str) -> list[Commit]:
    """Commits on bad's first-parent chain after good, oldest first (bad last). RefError when
    good is not on that chain or nothing lies between them."""
    good_sha, bad_sha = resolve(repo, good), resolve(repo, bad)
    try:
        _git(repo, "merge-base", "--is-ancestor", good_sha, bad_sha)
    except RefError:
        raise RefError(f"good {good!r} is not an ancestor of bad {bad!r}") from None
    out = _git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H%x00%P%x00%s",
        f"{good_sha}..{bad_sha}",
    )
    commits = []
    for line in filter(None, out.splitlines()):
        sha, parents, subject = line.split("\0", 2)
        commits.append(Commit(sha, subject, len(parents.split()) > 1))
    if not commits:
        raise RefError(f"good {good!r} and bad {bad!r} are the same commit")
    if first_parent(repo, commits[0].sha) != good_sha:
        raise RefError(
            f"good {good!r} is not on bad's first-parent chain (`git log --first-parent {bad}`);"
            " use the merge-base or a commit of that chain"
        )
    return commits


def first_parent(repo: Path, sha: str) -> str:
    return _git(repo, "rev-parse", f"{sha}^1")
