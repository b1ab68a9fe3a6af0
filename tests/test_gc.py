"""`harness gc`: cached commit worktrees (and their build files) unused for a while are removed
through git, so the repository forgets them; recently used ones stay; --dry-run removes none."""

from __future__ import annotations

import os
import time

from project_repo import ProjectRepo

from harness.arms.worktrees import cache_dir


def test_gc_removes_what_was_not_used_and_keeps_the_rest(tmp_path):
    repo = ProjectRepo(tmp_path, "m")
    old, new = repo.git("rev-parse", "HEAD"), repo.commit("server: 30 ms", ttft="30")
    cache = tmp_path / "cache"
    for sha in (old, new):
        r = repo.harness("run", "--ref", sha, "--suite", "suite.toml", "--dry-run", cache=cache)
        assert r.returncode == 0, r.stderr
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
