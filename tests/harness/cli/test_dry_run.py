"""`--dry-run` touches nothing: refs are resolved with git alone, no worktree is checked out,
no folder or file is made (results/, its logs, the worktree cache); with `--sim` it says what
would be simulated, not what would be served."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.cli import cli
from helpers.throwaway_repo import ThrowawayRepo


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every entry under `roots`: its kind, size and modification time."""
    seen = {}
    for root in roots:
        if not root.exists():
            continue
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = Path(folder, name)
                st = path.lstat()
                seen[str(path)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def test_a_dry_run_leaves_the_repository_results_and_cache_unchanged(tmp_path, monkeypatch):
    repo = ThrowawayRepo(tmp_path)
    repo.commit("second", "README.md", None, "\nmore\n")
    cache = tmp_path / "cache"
    monkeypatch.setenv("SERVEGATE_CACHE", str(cache))
    before = snapshot(repo.path, cache)
    for verb in (
        ["ab", "--base", "main~1", "--head", "main"],
        ["ab"],  # HEAD against the working tree
        ["ab", "--base", "main~1", "--head", "main", "--sim", "h200:llama-3-8b"],
        ["sweep", "--base", "main~1", "--head", "main", "--levels", "1,2"],
        ["sweep", "--head-flags", "--parallel 2", "--sim", "h200:llama-3-8b"],
        ["run", "--suite", "smoke", "--ref", "main~1"],
        ["bisect", "--good", "main~1"],
    ):
        out = cli(*verb, "--dry-run", cwd=repo.path)
        assert out.returncode == 0, (verb, out.stdout + out.stderr)
        assert snapshot(repo.path, cache) == before, verb
    assert not cache.exists()
    assert not (repo.path / "results" / "logs").exists()
    assert not (repo.path / "results" / "runs").exists()


def test_a_dry_run_with_sim_says_it_simulates(tmp_path, monkeypatch):
    repo = ThrowawayRepo(tmp_path)
    repo.commit("second", "README.md", None, "\nmore\n")
    monkeypatch.setenv("SERVEGATE_CACHE", str(tmp_path / "cache"))
    main = repo.git("rev-parse", "main")
    out = cli("ab", "--base", "main~1", "--head", "main", "--sim", "h200:llama-3-8b",
              "--dry-run", cwd=repo.path)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    head = next(line for line in out.stdout.splitlines() if line.startswith("head: "))
    assert f"commit {main}" in head and "| simulate: " in head and "serve: " not in head
    assert "-m engine.sim run" in head and "--costs h200:llama-3-8b" in head
    assert "no server is started" in out.stdout and "servers:" not in out.stdout
    served = cli("ab", "--base", "main~1", "--head", "main", "--dry-run", cwd=repo.path)
    assert "| serve: " in served.stdout and "simulate" not in served.stdout
