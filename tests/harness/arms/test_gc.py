"""`harness gc`: cached commit worktrees (and their build files) unused for a while are removed
through git, so the repository forgets them; recently used ones stay; --dry-run removes none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from harness.arms.worktrees import cache_dir, checkout

from helpers import git
from helpers.project_repo import ProjectRepo


def checked_out(repo: Path, sha: str, cache: Path) -> None:
    """The commit checked out into the cache as an arm's would be, by a process that has
    ended (a dry run checks nothing out)."""
    subprocess.run(
        [sys.executable, "-c", "import pathlib\nfrom harness.arms.worktrees import checkout\n"
         f"checkout(pathlib.Path({str(repo)!r}), {sha!r})"],
        cwd=repo, env={**os.environ, "SERVEGATE_CACHE": str(cache)}, check=True,
    )  # fmt: skip


def test_gc_removes_what_was_not_used_and_keeps_the_rest(tmp_path):
    repo = ProjectRepo(tmp_path, "m")
    old, new = repo.git("rev-parse", "HEAD"), repo.commit("server: 30 ms", ttft="30")
    cache = tmp_path / "cache"
    for sha in (old, new):
        checked_out(repo.path, sha, cache)
    os.environ["SERVEGATE_CACHE"] = str(cache)
    try:
        folder = cache_dir(repo.path)
    finally:
        del os.environ["SERVEGATE_CACHE"]
    assert (folder / old).is_dir() and (folder / new).is_dir()
    long_ago = time.time() - 30 * 86400
    for path in folder.glob(f"{old}*"):
        os.utime(path, (long_ago, long_ago))

    dry = repo.harness("gc", "--dry-run", cache=cache)
    assert dry.returncode == 0 and f"would remove {old[:10]}" in dry.stdout, dry.stdout
    assert new[:10] not in dry.stdout and (folder / old).is_dir()

    r = repo.harness("gc", cache=cache)
    assert r.returncode == 0 and f"removed {old[:10]}" in r.stdout, r.stdout + r.stderr
    assert "1 commit(s) kept" in r.stdout
    assert not list(folder.glob(f"{old}*")) and (folder / new).is_dir()
    assert str(folder / old) not in repo.git("worktree", "list")

    everything = repo.harness("gc", "--older-than", "0", cache=cache)
    assert f"removed {new[:10]}" in everything.stdout and not (folder / new).exists()


def _folder(repo, cache):
    os.environ["SERVEGATE_CACHE"] = str(cache)
    try:
        return cache_dir(repo.path)
    finally:
        del os.environ["SERVEGATE_CACHE"]


def test_gc_never_follows_a_link_out_of_the_cache(tmp_path):
    # an entry of the cache that is a symbolic link to the user's own linked worktree, with
    # uncommitted work in it: gc removes the link at most, never the worktree behind it
    repo = ProjectRepo(tmp_path, "m")
    sha = repo.git("rev-parse", "HEAD")
    mine = tmp_path / "my-worktree"
    repo.git("worktree", "add", "-q", "--detach", str(mine), sha)
    (mine / "notes.txt").write_text("uncommitted work\n")
    cache = tmp_path / "cache"
    folder = _folder(repo, cache)
    folder.mkdir(parents=True)
    (folder / sha).symlink_to(mine)
    long_ago = time.time() - 30 * 86400
    os.utime(folder / sha, (long_ago, long_ago), follow_symlinks=False)

    r = repo.harness("gc", "--older-than", "0", cache=cache)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (mine / "notes.txt").read_text() == "uncommitted work\n"
    assert str(mine) in repo.git("worktree", "list")
    assert not (folder / sha).is_symlink() and "the link removed" in r.stdout, r.stdout

    # a checkout through such a link never serves from (nor removes) what it leads to
    (folder / sha).symlink_to(mine)
    checked_out(repo.path, sha, cache)
    assert (mine / "notes.txt").exists() and (folder / sha).is_dir()
    assert not (folder / sha).is_symlink()


def test_gc_removes_nothing_when_the_repositorys_folder_in_the_cache_is_a_link(tmp_path):
    # the repository's own folder in the cache links to a user's folder that holds a folder
    # named like a cached commit: resolved through the same link on both sides, it would pass
    repo = ProjectRepo(tmp_path, "m")
    sha = repo.git("rev-parse", "HEAD")
    cache = tmp_path / "cache"
    folder = _folder(repo, cache)
    folder.parent.mkdir(parents=True)
    users = tmp_path / "users-folder"
    (users / sha).mkdir(parents=True)
    (users / sha / "thesis.tex").write_text("years of work\n")
    folder.symlink_to(users)
    for level in (folder, folder.parent):  # the repository's folder, then the worktrees'
        r = repo.harness("gc", "--older-than", "0", cache=cache)
        assert r.returncode == 2 and "is a symbolic link" in r.stderr, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert (users / sha / "thesis.tex").read_text() == "years of work\n"
        if level is folder:  # now the level above: worktrees/ itself a link
            folder.unlink()
            folder.parent.rmdir()
            (tmp_path / "linked").mkdir()
            (tmp_path / "linked" / folder.name).symlink_to(users)
            folder.parent.symlink_to(tmp_path / "linked")


def test_gc_keeps_a_worktree_a_running_harness_holds_and_says_why(tmp_path):
    repo = ProjectRepo(tmp_path, "m")
    sha = repo.git("rev-parse", "HEAD")
    cache = tmp_path / "cache"
    # the arm's own code path: checkout() holds the worktree for the life of the process
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib\n"
         "from harness.arms.worktrees import checkout\n"
         f"co = checkout(pathlib.Path({str(repo.path)!r}), {sha!r})\n"
         "print(co.path, flush=True)\nsys.stdin.read()"],
        cwd=repo.path, env={**os.environ, "SERVEGATE_CACHE": str(cache)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        worktree = Path(holder.stdout.readline().strip())
        assert worktree.is_dir() and worktree.parent == _folder(repo, cache)
        r = repo.harness("gc", "--older-than", "0", cache=cache)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"kept {sha[:10]}: in use by a running harness" in r.stdout, r.stdout
        assert "1 commit(s) kept" in r.stdout and "1 in use" in r.stdout
        assert (worktree / "server.py").is_file()
        assert str(worktree) in repo.git("worktree", "list")
    finally:
        holder.communicate("")
    r = repo.harness("gc", "--older-than", "0", cache=cache)  # released: now it goes
    assert f"removed {sha[:10]}" in r.stdout and not worktree.exists(), r.stdout


def test_a_worktree_restored_into_a_new_clone_is_reattached_with_its_build(tmp_path, monkeypatch):
    """A CI cache restores ~/.cache/servegate into a fresh clone: the cached worktree's .git
    names a clone that is gone. It becomes the new clone's worktree again, its build kept, its
    unchanged files untouched, a tracked file changed in the cache put back."""
    monkeypatch.setenv("SERVEGATE_CACHE", str(tmp_path / "cache"))
    repo, moved = tmp_path / "workspace", tmp_path / "old-clone"
    repo.mkdir()
    for name in ("server.py", "README"):
        (repo / name).write_text(f"{name} at the commit\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "server")
    sha = git(repo, "rev-parse", "HEAD")
    co = checkout(repo, sha)
    (co.path / "build.out").write_text("built")
    (co.path / "README").write_text("edited in the cache")
    os.utime(co.path / "server.py", (1_000_000_000, 1_000_000_000))
    repo.rename(moved)  # the job ends; the next job clones afresh at the same path
    git(tmp_path, "clone", "-q", str(moved), str(repo))
    again = checkout(repo, sha)
    assert again.path == co.path and git(again.path, "rev-parse", "HEAD") == sha
    assert (again.path / "build.out").read_text() == "built"
    assert (again.path / "README").read_text() == "README at the commit\n"
    assert (again.path / "server.py").stat().st_mtime == 1_000_000_000
    assert f"worktree {again.path}" in git(repo, "worktree", "list", "--porcelain")
