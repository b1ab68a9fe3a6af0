"""`harness bisect`'s bad input on a throwaway copy of this repository: one line and exit 2.
Bisecting for real, through a project file, is in test_projects.py (a scripted server whose
TTFT per commit is known, so the answer is certain on a noisy machine)."""

import json
import subprocess
from pathlib import Path

from helpers.cli import harness
from helpers.throwaway_repo import ThrowawayRepo

HARMLESS = [("docs: say the chunk size", "docs/engine.md", None, "\nThe chunk is 512 tokens.\n")]


def bisect(
    repo: ThrowawayRepo, tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "results"
    r = harness(
        "bisect", "--quiet", "--out-dir", str(out), *args,
        cwd=repo.path, cache=tmp_path / "cache", timeout=3000,
    )  # fmt: skip
    found = sorted(out.glob("*-bisect-*.json"))
    return r, json.loads(found[0].read_text()) if found else {}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    repo = ThrowawayRepo(tmp_path)
    repo.commit(*HARMLESS[0])
    cases = {
        ("--good", "no-such-ref"): "unknown git ref",
        ("--good", "main", "--bad", "main~1"): "not an ancestor",
        ("--good", "main"): "same commit",
        ("--good", "main~1", "--suite", "no-such-suite"): "suite",
        ("--good", "main~1", "--metric", "e2e_p50_ms", "--suite", "smoke"): "not gated",
    }
    for args, said in cases.items():
        r, _ = bisect(repo, tmp_path, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr and said in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
