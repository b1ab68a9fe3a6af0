"""The pull request's summary: its first line states the verdict on every path (PASS,
REGRESSION, INCONCLUSIVE, INVALID), its table agrees with the report's, its reproduce line is
pinned to commits; `harness ab` writes it to --summary and to $GITHUB_STEP_SUMMARY."""

import io
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from rich.console import Console

from harness.report.headline import headline as headline_of
from harness.report.headline import trade_off
from harness.report.summary import (
    MARK,
    ab_summary,
    bisect_summary,
    headline,
    reproduce,
    sweep_summary,
)
from harness.report.tables import verdict_line
from harness.report.terminal import print_verdict
from harness.results.ab_result import ABResult
from harness.results.bisect_result import BisectResult
from harness.results.comparison import Comparison
from harness.results.sweep_result import SweepResult
from harness.stats.compare import compare_rounds, overall_verdict

from helpers.arms import scripted
from helpers.cli import exit_agrees, harness
from helpers.fake_runs import crashed, make_rounds
from helpers.processes import unique_marker
from helpers.suites import SUITE as SCRIPTED_SUITE
from helpers.suites import write_suite

SHA_A, SHA_B = "a" * 40, "b" * 40


def saved(suite: str, base: str, head: str, commits: tuple, command: str, comp: dict) -> dict:
    """An A/B result as `harness ab` saves it, with no rounds kept."""
    arm = {"ref": None, "cmd": None, "flags": None, "env": None}
    return {"suite": suite, "created": "2026-12-05T00:00:00+00:00", "rounds": [], "crash": None,
            "base": arm | {"label": base, "commit": commits[0]},
            "head": arm | {"label": head, "commit": commits[1]},
            "command": command, "comparison": comp}  # fmt: skip


def ab_summary_of(saved_doc: dict, report: str | None) -> str:
    return ab_summary(ABResult.from_json(saved_doc), report)


def ab_result(head_scale: float, cv: float = 0.01, crash: dict | None = None) -> dict:
    rng = np.random.default_rng(5)
    base = 100 * rng.lognormal(0, cv, 5)
    head = base * head_scale * rng.lognormal(0, cv, 5)
    comparison = compare_rounds(
        make_rounds({"base": base, "head": head}, "ttft_p50_ms"),
        {"ttft_p50_ms": 0.1},
        crash=crashed(crash),
    )
    return saved(
        "short-concurrency",
        "main@aaaaaaaa",
        "HEAD@bbbbbbbb",
        (SHA_A, SHA_B),
        "harness ab --base main --head=HEAD --out-dir results",
        comparison.to_json(),
    )


def test_each_verdict_is_said_in_the_first_line():
    cases = {
        "PASS": ab_result(1.0),
        "REGRESSION": ab_result(1.4),
        "INCONCLUSIVE": ab_result(1.1, cv=0.2),
        "INVALID": ab_result(1.0, crash={"arm": "head", "round": 2, "message": "exit 137"}),
    }
    for verdict, result in cases.items():
        assert result["comparison"]["verdict"] == verdict
        text = ab_summary_of(result, "results/r.md")
        first = text.splitlines()[0]
        assert f"servegate ab: {verdict} (exit {result['comparison']['exit_code']})" in first
        assert "short-concurrency, main@aaaaaaaa vs HEAD@bbbbbbbb" in first
        assert "| Metric | Base | Head | Change | 95% CI | Tolerance | Verdict |" in text
        assert f"harness ab --base {SHA_A} --head {SHA_B} --out-dir results" in text
        assert "Full report: `results/r.md`" in text
    assert "ttft_p50_ms +" in ab_summary_of(cases["REGRESSION"], None).splitlines()[0]
    assert "not a pass" in ab_summary_of(cases["INCONCLUSIVE"], None).splitlines()[0]
    assert "arm head crashed in round 2" in ab_summary_of(cases["INVALID"], None).splitlines()[0]
    assert "⚠️" in ab_summary_of(cases["INCONCLUSIVE"], None).splitlines()[0]


def gated(name: str, ratio: float, verdict: str, tol: float, lower: bool = True) -> dict:
    """One gated metric as the gate stores it, with exact numbers (the prefill-storm seed's)."""
    lo, hi = ratio * 0.9, ratio * 1.1
    return {"name": name, "base": [1.0], "head": [ratio], "ratio": ratio, "ci_low": lo,
            "ci_high": hi, "tolerance": tol, "verdict": verdict, "mde": 1.1, "method": "t",
            "lower_is_better": lower, "note": "", "alpha": 0.0004, "evidence_low": lo,
            "evidence_high": hi, "detectable": 1.3, "base_value": 100.0,
            "head_value": 100.0 * ratio, "spread": 0.05}  # fmt: skip


def storm(*metrics: dict) -> dict:
    comp = {"verdict": overall_verdict([SimpleNamespace(**m) for m in metrics], []),
            "rounds": 5, "fingerprint": "f", "metrics": list(metrics), "noise": [],
            "invalid": [], "warnings": [], "schedule": None, "ungated": []}  # fmt: skip
    comp["exit_code"] = {"REGRESSION": 1}.get(comp["verdict"], 0)
    return saved(
        "prefill-storm",
        "HEAD@c4678187 default",
        "WORKTREE@c4678187 --prefill-max-seqs 4",
        (SHA_A, SHA_A),
        "harness ab --suite prefill-storm --head-flags '--prefill-max-seqs 4'",
        comp,
    )


def test_a_regression_that_bought_an_improvement_is_a_trade_off_in_every_first_line():
    ab = storm(
        gated("ttft_p50_ms", 0.521, "IMPROVEMENT", 0.15),
        gated("tok_s", 1.107, "PASS", 0.25, lower=False),
        gated("itl_p50_ms", 0.983, "PASS", 0.25),
        gated("tpot_ms", 3.851, "REGRESSION", 0.25),
    )
    comp = Comparison.from_json(ab["comparison"])
    assert comp.verdict == "REGRESSION" and comp.exit_code == 1  # the gate is unchanged
    assert trade_off(comp) == "tpot_ms +285% paid for ttft_p50_ms 0.52x"
    assert headline_of(comp).words == "REGRESSION (trade-off)"
    assert verdict_line(headline_of(comp)) == (
        "# REGRESSION (trade-off): tpot_ms +285% paid for ttft_p50_ms 0.52x; exit 1 (a gated "
        "metric is worse beyond tolerance, at the gate's 1% false-regression rate)"
    )
    assert ab_summary_of(ab, None).splitlines()[0] == (
        "### ❌ servegate ab: REGRESSION (trade-off, exit 1): prefill-storm, HEAD@c4678187 "
        "default vs WORKTREE@c4678187 --prefill-max-seqs 4: tpot_ms +285% paid for "
        "ttft_p50_ms 0.52x"
    )
    out = io.StringIO()
    print_verdict(Console(file=out, width=120), ABResult.from_json(ab))
    assert out.getvalue().splitlines()[-1] == (
        "verdict: REGRESSION (trade-off): tpot_ms +285% paid for ttft_p50_ms 0.52x (exit 1: a "
        "gated metric is worse beyond tolerance, at the gate's 1% false-regression rate)"
    )


def test_every_metric_that_paid_and_was_bought_is_named_and_nothing_else_is_a_trade():
    both = storm(
        gated("ttft_p50_ms", 0.521, "IMPROVEMENT", 0.15),
        gated("tok_s", 0.70, "REGRESSION", 0.25, lower=False),
        gated("itl_p50_ms", 1.052, "REGRESSION", 0.01),
        gated("peak_rss_bytes", 0.80, "IMPROVEMENT", 0.10),
    )["comparison"]
    assert trade_off(Comparison.from_json(both)) == (
        "tok_s -30%, itl_p50_ms +5.2% paid for ttft_p50_ms 0.52x, peak_rss_bytes 0.80x"
    )
    plain = storm(gated("tpot_ms", 3.851, "REGRESSION", 0.25), gated("tok_s", 1.1, "PASS", 0.25))
    improved = storm(gated("ttft_p50_ms", 0.521, "IMPROVEMENT", 0.15))
    unsure = storm(gated("ttft_p50_ms", 0.521, "IMPROVEMENT", 0.15),
                   gated("tpot_ms", 1.2, "INCONCLUSIVE", 0.25))  # fmt: skip
    for ab in (plain, improved, unsure):
        said = headline_of(Comparison.from_json(ab["comparison"]))
        assert said.trade_off is None and said.words == said.verdict
        assert "trade-off" not in ab_summary_of(ab, None) + verdict_line(said)
    said = headline_of(Comparison.from_json(plain["comparison"]))
    assert verdict_line(said).startswith("# REGRESSION: exit 1 (")
    assert "servegate ab: REGRESSION (exit 1): " in ab_summary_of(plain, None).splitlines()[0]


# the mark before a verdict groups it for a reader: green only for what let the change through
MARKS = {"PASS": "✅", "IMPROVEMENT": "✅", "VALID": "✅", "NAMED": "✅", "REGRESSION": "❌",
         "INCONCLUSIVE": "⚠️", "INVALID": "⛔"}  # fmt: skip


def test_an_invalid_result_is_never_marked_with_the_passing_ones():
    assert MARK == MARKS
    green = {verdict for verdict, mark in MARK.items() if mark == "✅"}
    assert green == {"PASS", "IMPROVEMENT", "VALID", "NAMED"}, green
    for verdict, mark in MARKS.items():
        line = headline("ab", verdict, 0, "s")
        assert line.startswith(f"### {mark} servegate ab: {verdict} (exit 0): s"), line
    crashed = ab_result(1.0, crash={"arm": "head", "round": 2, "message": "exit 137"})
    first = ab_summary_of(crashed, None).splitlines()[0]
    assert first.startswith("### ⛔ servegate ab: INVALID (exit 2): short-concurrency"), first
    assert "✅" not in first
    assert ab_summary_of(ab_result(1.0), None).startswith("### ✅ servegate ab: PASS (exit 0): ")
    commit = {"sha": SHA_B, "short": SHA_B[:10], "subject": "x"}
    lost = {"suite": "s", "good": commit, "bad": commit, "culprit": None, "path": []}
    assert bisect_summary(BisectResult.from_json(lost), None).startswith(
        "### ⛔ servegate bisect: INVALID (exit 2): "
    )


def test_the_change_column_is_the_ratio_of_the_two_columns_beside_it():
    result = ab_result(1.04)
    row = next(line for line in ab_summary_of(result, None).splitlines() if "| ttft_p50_ms" in line)
    base, head, change = (float(c.split()[0].rstrip("%")) for c in row.split("|")[2:5])
    assert abs((head / base - 1) * 100 - change) < 0.16, row  # each cell rounded


def test_reproduce_pins_each_ref_and_keeps_the_rest():
    shas = {"base": SHA_A, "head": None}
    assert reproduce("harness ab --base main --suite x --head HEAD", shas) == (
        f"harness ab --base {SHA_A} --suite x --head HEAD"
    )
    assert reproduce("harness ab --base=main", shas) == f"harness ab --base {SHA_A}"


def test_reproduce_pins_a_defaulted_ref_right_after_the_verb():
    both = {"base": SHA_A, "head": SHA_B}
    assert reproduce("harness ab --suite x", both) == (
        f"harness ab --base {SHA_A} --head {SHA_B} --suite x"
    )
    dirty_head = {"base": SHA_A, "head": None}  # uncommitted changes: left to the default
    assert reproduce("harness ab --head-flags '--parallel 2'", dirty_head) == (
        f"harness ab --base {SHA_A} --head-flags '--parallel 2'"
    )
    assert reproduce("harness bisect --good main~4", {"good": SHA_A, "bad": SHA_B}) == (
        f"harness bisect --bad {SHA_B} --good {SHA_A}"
    )
    assert reproduce("harness ab --base-cmd 'srv --port {port}'", {"base": None, "head": None}) == (
        "harness ab --base-cmd 'srv --port {port}'"
    )


def test_sweep_and_bisect_summaries_lead_with_their_verdict():
    comp = ab_result(1.4)["comparison"]
    sweep = {
        "suite": "sweep",
        "command": "harness sweep --base main --head HEAD",
        "arms": {
            "base": {
                "label": "main",
                "commit": SHA_A,
                "ref": "main",
                "cmd": None,
                "flags": None,
                "env": None,
            },
            "head": {"label": "HEAD", "ref": "HEAD", "cmd": None, "flags": None, "env": None},
        },  # fmt: skip
        "judgement": {
            "verdict": "REGRESSION",
            "exit_code": 1,
            "first_regression": "c4",
            "first_regression_metrics": ["ttft_p50_ms"],
            "invalid": [],
            "levels": {"c4": comp},
        },
    }
    first = sweep_summary(SweepResult.from_json(sweep), None).splitlines()[0]
    assert "servegate sweep: REGRESSION (exit 1)" in first and "first regresses at c4" in first
    commit = {"sha": SHA_B, "short": SHA_B[:10], "subject": "cap prefill"}
    good = {"sha": SHA_A, "short": SHA_A[:10], "subject": "ok"}
    bisect = {"suite": "s", "good": good, "bad": commit, "culprit": commit, "path": [],
              "command": "harness bisect --good main~3"}  # fmt: skip
    text = bisect_summary(BisectResult.from_json(bisect), "results/b.md")
    assert "servegate bisect: NAMED (exit 0)" in text.splitlines()[0]
    assert "first bad commit bbbbbbbbbb cap prefill" in text.splitlines()[0]
    assert f"--good {SHA_A}" in text
    lost = bisect_summary(BisectResult.from_json(bisect | {"culprit": None}), None)
    lost = lost.splitlines()[0]
    assert "servegate bisect: INVALID (exit 2)" in lost


SUITE = SCRIPTED_SUITE.format(extra="[gate]\nttft_p50_ms = 0.1")


def run_ab(tmp_path: Path, head: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE)
    mine, github = tmp_path / "pr" / "summary.md", tmp_path / "step-summary.md"
    github.write_text("earlier step\n")  # appended to, never replaced
    args = ["--suite", str(suite), "--rounds", "3", "--max-rounds", "3", "--summary", str(mine)]
    cmds = ["--base-cmd", scripted("--ttft-ms 150 --bare-health", model=marker)]
    cmds += ["--head-cmd", scripted(f"{head} --bare-health", model=marker)]
    r = harness("ab", "--quiet", *args, *cmds, cwd=tmp_path,
                env={"GITHUB_STEP_SUMMARY": str(github)}, cache=tmp_path)  # fmt: skip
    return r, mine, github


def test_harness_ab_writes_the_summary_to_the_file_and_to_github(tmp_path):
    r, mine, github = run_ab(tmp_path, "--ttft-ms 200")
    # 1.33x against 10% in three rounds: REGRESSION, or on a loaded machine INCONCLUSIVE (or
    # INVALID, its client starved); the summary says the verdict the exit code and result say
    paths = list((tmp_path / "results").glob("*.json"))
    assert len(paths) == 1, r.stdout + r.stderr
    saved = json.loads(paths[0].read_text())
    exit_agrees(r, saved)
    verdict, code = saved["comparison"]["verdict"], saved["comparison"]["exit_code"]
    text = mine.read_text()
    assert text.splitlines()[0].startswith(
        f"### {MARKS[verdict]} servegate ab: {verdict} (exit {code})"
    )
    assert github.read_text() == "earlier step\n" + text
    assert "Full report: `results/" in text and "Traceback" not in r.stderr


def test_a_crashed_head_gives_an_invalid_summary(tmp_path):
    r, mine, _ = run_ab(tmp_path, "--ttft-ms 150 --exit-at-start 3")
    assert r.returncode == 2, r.stdout + r.stderr
    first = mine.read_text().splitlines()[0]
    assert "servegate ab: INVALID (exit 2)" in first and "crashed" in first


def test_an_unwritable_summary_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "dir").mkdir()
    r = harness("ab", "--summary", str(tmp_path / "dir"), "--base-cmd", "x {port}",
                "--head-cmd", "y {port}", cwd=tmp_path, timeout=60)  # fmt: skip
    assert r.returncode == 2 and "is a directory" in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("Error: Invalid value for '--summary'")


def merge(tmp_path: Path, *results: dict, summary: bool = False):
    paths = []
    for i, result in enumerate(results):
        paths.append(tmp_path / f"shard{i}.json")
        paths[-1].write_text(json.dumps(result))
    extra = ["--summary", str(tmp_path / "merged.md")] if summary else []
    return harness("merge", *map(str, paths), *extra, cwd=tmp_path, timeout=60)


def test_merge_exits_with_the_worst_shard_and_leads_with_its_verdict(tmp_path):
    ok, bad = ab_result(1.0), ab_result(1.4)
    unsure = ab_result(1.1, cv=0.2)
    broken = ab_result(1.0, crash={"arm": "head", "round": 1, "message": "exit 137"})
    for shards, code, verdict in [
        ((ok, ok), 0, "PASS"),
        ((ok, unsure), 0, "INCONCLUSIVE"),  # exit 0, but not hidden behind the PASS
        ((ok, bad, unsure), 1, "REGRESSION"),
        ((bad, broken, ok), 2, "INVALID"),
    ]:
        r = merge(tmp_path, *shards, summary=True)
        assert r.returncode == code, (verdict, r.stdout, r.stderr)
        first = r.stdout.splitlines()[0]
        said = f"### {MARKS[verdict]} servegate merge: {verdict} (exit {code}): "
        assert first.startswith(said + f"{len(shards)} result(s)"), first
        rows = [line for line in r.stdout.splitlines() if "| short-concurrency |" in line]
        assert len(rows) == len(shards)  # suite x machine x metric: one gated metric each
    assert (tmp_path / "merged.md").read_text().count("servegate merge") == 4


def test_merge_refuses_what_is_not_a_result(tmp_path):
    (tmp_path / "junk.json").write_text('{"hello": 1}')
    r = harness("merge", str(tmp_path / "junk.json"), cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("Error: ") and "not an A/B" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
