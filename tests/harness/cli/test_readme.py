"""The README's harness examples do what their comments say: each line is run as written (with
`--dry-run`, which plans every arm and starts nothing) in a throwaway copy of this repository,
and the arms it plans are checked against the comment."""

from __future__ import annotations

import re
import shlex

import pytest

from helpers import REPO
from helpers.cli import cli
from helpers.throwaway_repo import ThrowawayRepo

DRY = ("ab", "sweep", "bisect", "run")
# need saved results or a cache: run for real in test_ab_paths.py, test_summary.py,
# test_history.py, test_gc.py and test_export.py
OFFLINE = ("compare", "report", "merge", "history", "publish", "gc", "export")


def readme_examples() -> list[tuple[list[str], str]]:
    """(argv after `harness`, comment) for each example in the README's harness block."""
    text = (REPO / "README.md").read_text()
    block = text.split("## The harness\n```sh\n", 1)[1].split("```", 1)[0]
    block = re.sub(r"\\\n\s*", " ", block)  # continuation lines
    examples = []
    for line in block.splitlines():
        command, _, comment = line.partition("  # ")
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/harness", line
        examples.append((argv[1:], comment.strip()))
    return examples


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> ThrowawayRepo:
    repo = ThrowawayRepo(tmp_path_factory.mktemp("readme"))
    for i in range(8):  # so that main~8 exists
        repo.commit(f"docs: line {i}", "docs/engine.md", None, f"\nline {i}\n")
    (repo.path / "README.md").write_text("an uncommitted change\n")
    return repo


def lines(out) -> dict[str, str]:
    assert out.returncode == 0, out.stdout + out.stderr
    return dict(line.split(": ", 1) for line in out.stdout.splitlines() if ": " in line)


def test_every_readme_example_is_checked():
    verbs = [argv[0] for argv, _ in readme_examples()]
    assert set(verbs) == {*DRY, *OFFLINE, "suites"}, verbs
    assert len(verbs) == len(EXPECTED) + len(OFFLINE) + 1


EXPECTED = {
    "two commits": lambda p, r: (
        p["base"].startswith("main@")
        and p["head"].startswith("HEAD@")
        and r.git("rev-parse", "main") in p["base"]
        and r.git("rev-parse", "HEAD") in p["head"]
    ),
    "HEAD vs your uncommitted changes": lambda p, r: (
        p["base"].startswith("HEAD@")
        and "+dirty" not in p["base"]
        and p["head"].startswith("WORKTREE@")
        and "+dirty" in p["head"]
    ),
    "two flag sets on one build": lambda p, r: (
        p["base"].split(" commit ")[1][:40] == p["head"].split(" commit ")[1][:40]
        and "--max-batch-prefill-tokens 2048" in p["head"].split("| flags: ")[1]
        and "--max-batch-prefill-tokens" not in p["base"]
    ),
    "any folder, no git": lambda p, r: (
        p["base"].startswith("llama-server")
        and "serve: llama-server -m models/smollm2-q4_1.gguf --port {port}" in p["base"]
        and "serve: llama-server -m models/smollm2-q8_0.gguf --port {port}" in p["head"]
    ),
    "running servers": lambda p, r: (
        "running at http://127.0.0.1:8000" in p["base"]
        and "running at http://127.0.0.1:8001" in p["head"]
    ),
    "GPU servers: one per device, a CI limit": lambda p, r: (
        p["servers"] == "at once, one per device (0,1), swapping every round"
        and p["budget"].startswith("25 min")
    ),
    "tensor-parallel: two devices per arm": lambda p, r: (
        p["servers"] == "at once, one per group (0+1,2+3), swapping every round"
        and "HuggingFaceTB/SmolLM2-135M-Instruct" in p["head"]  # gpu-chat's model
    ),
    "as many rounds as the noise needs": lambda p, r: (
        p["rounds"].endswith("then up to 41 as the noise measured needs")
        and p["budget"].startswith("20 min")
    ),
    "streams dropped mid-decode; 2 client processes": lambda p, r: (
        p["arm"].startswith("WORKTREE@") and p["client processes"] == "2"
    ),
    "load curves: the knee, goodput": lambda p, r: (
        list(p) == ["arm", "levels"]
        and p["arm"].startswith("WORKTREE@")
        and p["levels"].startswith("1, 2, 4, 8, 16")
    ),
    "A/B per load level": lambda p, r: (
        p["base"].startswith("HEAD@")
        and p["head"].startswith("WORKTREE@")
        and "--parallel 2" in p["head"]
        and "--parallel" not in p["base"]
    ),
    "which commit regressed it": lambda p, r: (
        p["good"].startswith(r.git("rev-parse", "main~8"))
        and p["bad"].startswith(r.git("rev-parse", "main"))
    ),
    "one arm, one run, a summary table": lambda p, r: (
        list(p) == ["arm"] and p["arm"].startswith("WORKTREE@")
    ),
}


@pytest.mark.parametrize(
    ("argv", "comment"),
    [e for e in readme_examples() if e[0][0] in DRY],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_a_readme_example_plans_what_its_comment_says(repo, tmp_path, argv, comment):
    assert "..." not in argv, "an example runs as typed: no placeholder"
    where = tmp_path if "no git" in comment else repo.path
    out = cli(*argv, "--dry-run", cwd=where)
    assert EXPECTED[comment](lines(out), repo), out.stdout


def test_the_readme_starts_with_the_two_commands_and_dates_its_figures():
    text = (REPO / "README.md").read_text()
    first = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert first == [
        "sh scripts/install.sh && .venv/bin/harness ab --base main --head HEAD",
        "sh scripts/install.sh --test && .venv/bin/python -m pytest -n auto --dist loadfile",
    ]
    # CI runs the README's test command: the same install and the same pytest options
    ci = (REPO / ".ci" / "run").read_text()
    assert "sh scripts/install.sh --test" in ci
    assert ".venv/bin/python -m pytest -q -n auto --dist loadfile" in ci
    # the A/A's time: the committed 2026-12-01 measurement at bb201a9, its machine beside it
    said = " ".join(text.split("## Gate your server")[0].split())
    assert "On 2026-12-01 (commit bb201a9, the project's quiet 2-core AMD EPYC VM" in said
    assert "it took 47-70 s after the install" in said and "ready 1.2-1.3 s" in said
    assert "(the mission)" not in text and "pip install servegate" not in text


def test_no_doc_promises_a_package_index(tmp_path):
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        if path.name != "changelog.md":  # history says what was
            assert "pip install servegate" not in path.read_text(), path
            assert "pip install 'servegate[" not in path.read_text(), path


def test_suites_lists_the_shipped_workloads(tmp_path):
    out = cli("suites", cwd=tmp_path)
    assert out.returncode == 0 and "smoke" in out.stdout and "boundary-spill" in out.stdout
