"""`harness ab` end to end: A/A passes, a seeded commit regresses TTFT p95 (exit 1), a head
that crashes under load is exit 2 with its log in the report."""

import json
import re
import shutil
import subprocess
from pathlib import Path

from helpers import REPO
from helpers import git as run_git
from helpers.arms import scripted
from helpers.cli import harness, valid_attempt
from helpers.processes import unique_marker
from helpers.suites import write_suite

PNG = b"\x89PNG\r\n\x1a\n"


def reports(out_dir: Path) -> list[Path]:
    return sorted(out_dir.glob("????-??-??-*.md"))


def test_a_a_on_smoke_writes_a_dated_report_whose_verdict_is_the_exit_code(tmp_path):
    # An A/A's verdict on real timings is the statistics' to keep honest, at the rate
    # tests/harness/stats simulates and docs/statistics.md measures; here: the plumbing
    def attempt(n: int):
        out = tmp_path / f"results{n}"
        r = harness("ab", "--quiet", "--base", "HEAD", "--head", "HEAD", "--suite", "smoke",
                    "--max-rounds", "3",  # the stopping rule's looks: test_ab_rounds.py
                    "--out-dir", str(out), cwd=REPO, cache=tmp_path / "cache",
                    timeout=1200)  # fmt: skip
        (md,) = reports(out)
        return (r, md), json.loads(md.with_suffix(".json").read_text())

    (r, md), result = valid_attempt(attempt)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    out = md.parent
    assert re.match(r"\d{4}-\d{2}-\d{2}-smoke-HEAD-.*-vs-HEAD-.*\.md", md.name)
    text = md.read_text()
    verdict = result["comparison"]["verdict"]
    first = text.splitlines()[0]
    assert first.startswith(f"# {verdict}") and f"exit {r.returncode} (" in first, first
    assert result["comparison"]["exit_code"] == r.returncode == (verdict == "REGRESSION")
    links = re.findall(r"\]\(([^)]+\.png)\)", text)
    assert sorted(links) == [md.stem + s for s in ("-rss.png", "-time.png", "-ttft.png")]
    for png in links:
        data = (out / png).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000 and data.endswith(b"IEND\xaeB`\x82")
    names = {m["name"] for m in result["comparison"]["metrics"]}
    assert {"ttft_p50_ms", "tok_s", "peak_rss_bytes"} <= names, names
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    runs = [rnd[arm] for rnd in result["rounds"] for arm in ("base", "head")]
    assert len(runs) >= 6 and all(run["server"]["commit"] == sha for run in runs)
    # one look at 3 rounds, as asked, and every round kept its wall time
    assert result["schedule"]["looks"] == [3] and len(result["rounds"]) == 3
    assert all(rnd["wall_s"] > 0 for rnd in result["rounds"])
    # servegate.toml starts a round's engines together: each arm's warm-up, its probes before
    # the phase, the phase and its probes after take turns, so neither arm's probes fall in
    # the other's measured requests
    assert [rnd["turns"] for rnd in result["rounds"]] == [8, 8, 8]


def throwaway_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """The current tree in a new repository: commit 1 as it is, commit 2 with the seed's
    pre-fix token cap (max_batch_prefill * prefill_chunk_size)."""
    repo = tmp_path / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True
    ).stdout.split("\0")
    for f in filter(None, files):
        if (REPO / f).is_file():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, repo / f)

    def git(*args: str) -> str:
        return run_git(repo, *args)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "base")
    config = repo / "engine" / "config.py"
    text = config.read_text()
    tight = text.replace(
        "return 2 * max_batch_prefill * prefill_chunk_size",
        "return max_batch_prefill * prefill_chunk_size",
    )
    assert tight != text
    config.write_text(tight)
    git("commit", "-qam", "token cap: the exactly-tight default")
    return repo, git("rev-parse", "HEAD~1"), git("rev-parse", "HEAD")


def test_two_engine_commits_serve_what_they_were_built_from(tmp_path):
    """The seeded tight-cap commit against its parent, each served from its own worktree: the
    culprit spills the burst's fourth row in every round and its parent never does. Whether
    TTFT p95 REGRESSES is timing on a 2-core machine: test_seeds.py judges that with wide
    margins, and test_projects.py gates commits where the answer is certain."""
    repo, base, head = throwaway_repo(tmp_path)

    def attempt(n: int):
        out = tmp_path / f"results{n}"
        r = harness("ab", "--quiet", "--base", base, "--head", head, "--suite", "boundary-spill",
                    "--model", "tiny", "--rounds", "3", "--max-rounds", "3", "--out-dir",
                    str(out), cwd=repo, cache=tmp_path / "cache", timeout=1200)  # fmt: skip
        (md,) = reports(out)
        return r, json.loads(md.with_suffix(".json").read_text())

    r, result = valid_attempt(attempt)
    assert r.returncode in (0, 1), r.stdout + r.stderr  # valid runs: a verdict, not INVALID
    assert result["base"]["commit"] == base and result["head"]["commit"] == head
    spilled = [
        sum(
            phase.get("engine_prefill_rows_spilled_total", 0)
            for phase in rnd[arm]["counters"].values()
        )
        for rnd in result["rounds"]
        for arm in ("base", "head")
    ]
    assert spilled[0::2] == [0] * len(result["rounds"])  # base never spills
    assert all(s >= 1 for s in spilled[1::2])  # head spills every round


def test_head_crash_under_load_is_exit_2_with_the_log_in_the_report(tmp_path):
    marker = unique_marker()
    suite = write_suite(
        tmp_path,
        """
model = "scripted"
[[phase]]
name = "load"
clients = 4
requests = 40
prompt_tokens = 16
max_tokens = 8
[gate]
ttft_p50_ms = 0.1
""",
    )
    out = tmp_path / "results"
    r = harness(
        "ab",
        "--quiet",
        "--suite",
        str(suite),
        "--base-cmd",
        scripted("--ttft-ms 5", model=marker),
        "--head-cmd",
        scripted("--ttft-ms 5 --die-at 6", model=marker),
        "--rounds",
        "2",
        "--out-dir",
        str(out),
        cwd=REPO,
        cache=tmp_path / "cache",
        timeout=1200,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    (md,) = reports(out)
    text = md.read_text()
    assert text.startswith("# INVALID")
    assert "crashed" in text and "scripted server on port" in text
