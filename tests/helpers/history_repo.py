"""A history of main for the history tests: a throwaway project (helpers/project_repo.py)
whose TTFT steps up 8% at one commit, each commit run once by `harness run --ref SHA`."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.project_repo import ProjectRepo

COMMITS, STEP_AT = 14, 8  # the 9th commit (index 8) answers 8% slower


def build_history(tmp_path: Path) -> tuple[ProjectRepo, list[str], Path]:
    """The project's commits, each run once by `harness run --ref SHA` into one folder."""
    marker = unique_marker()
    repo = ProjectRepo(tmp_path, marker)
    shas = [repo.commit("server: answer in 250 ms", ttft="250")]
    for i in range(1, COMMITS):
        ttft = "270" if i == STEP_AT else None  # 250 -> 270 ms: 1.08x
        shas.append(repo.commit(f"commit {i}", ttft=ttft, readme=f"change {i}"))
    folder = tmp_path / "history"
    for sha in shas:
        out = folder / f"{sha[:10]}.json"
        run = ("run", "--ref", sha, "--suite", "suite.toml", "--quiet", "--out", str(out))
        r = repo.harness(*run, cache=tmp_path / "cache")
        # a history keeps valid runs: once more where a loaded machine starved the client
        if out.is_file() and client_starved(json.loads(out.read_text())):
            r = repo.harness(*run, cache=tmp_path / "cache")
        assert r.returncode == 0, r.stdout + r.stderr
    assert not wait_no_survivors(marker)
    return repo, shas, folder
