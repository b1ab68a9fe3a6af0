"""results/ as a newcomer finds it: what is committed there lies in dated folders
(`YYYY-MM-DD-topic/`), nothing but README.md at the top, no `.log` file, and results/README.md
(the index) links every folder and nothing that is not there. Read from git's index, so a report
the harness has just written to results/ by default, not yet committed, fails nothing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from helpers import REPO

RESULTS = REPO / "results"
DATED = re.compile(r"\d{4}-\d{2}-\d{2}-[a-z0-9][a-z0-9.-]*")
HARNESS_OUTPUT = ("runs", "logs")  # `harness run`/`sim` JSONs and an A/B's logs: ignored by git


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    """Paths under results/ in git's index, relative to results/."""
    got = git("ls-files", "-z", "--", "results")
    if got.returncode != 0:
        pytest.skip("not a git checkout: what is committed cannot be read")
    return [p.removeprefix("results/") for p in got.stdout.split("\0") if p]


def test_every_committed_folder_is_dated_and_nothing_else_is_at_the_top(tracked):
    top_files = sorted(p for p in tracked if "/" not in p)
    folders = sorted({p.split("/", 1)[0] for p in tracked if "/" in p})
    assert top_files == ["README.md"], "only README.md lies loose in results/"
    assert folders, "results/ holds no committed folder"
    undated = [f for f in folders if not DATED.fullmatch(f)]
    assert not undated, f"folders not named YYYY-MM-DD-topic: {undated}"


def test_no_log_is_committed_and_the_harness_output_stays_ignored(tracked):
    assert not [p for p in tracked if p.endswith(".log")]
    for path in ("results/2026-01-01-x/run.log", "results/x.log",
                 *(f"results/{name}/x.json" for name in HARNESS_OUTPUT)):  # fmt: skip
        assert git("check-ignore", "-q", "--no-index", path).returncode == 0, f"{path} not ignored"


def links() -> list[str]:
    text = (RESULTS / "README.md").read_text()
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:|#", t)]


def test_every_relative_link_of_the_index_resolves():
    found = links()
    assert found
    missing = [t for t in found if not (RESULTS / t.split("#")[0]).exists()]
    assert not missing, f"results/README.md links to what is not there: {missing}"


def test_the_index_names_every_folder(tracked):
    folders = {p.split("/", 1)[0] for p in tracked if "/" in p}
    linked = {Path(t).parts[0] for t in links() if not t.startswith("..")}
    assert not folders - linked, f"folders results/README.md does not link: {folders - linked}"
