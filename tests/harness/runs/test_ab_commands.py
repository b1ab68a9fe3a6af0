"""`harness ab` with two command arms (any OpenAI-compatible server) end to end, from a folder
that is not a git repository and with no git on PATH: an A/A passes with a report whose arms
are labelled apart, a scripted 1.3x TTFT on head regresses, and `report`/`compare` re-read it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

from harness.arms.arms import make_arm
from harness.report.headline import clear_pass, headline
from harness.report.tables import machine_and_load, verdict_line
from harness.results.ab_result import Round
from harness.results.comparison import Comparison, MetricResult
from harness.runs.plan import ArmPlan, Side, label_arms
from harness.stats.verdict import changed_within_tolerance

from helpers import SCRIPTED_SERVER
from helpers.arms import described, scripted
from helpers.cli import harness, outside_git, saved_result, valid_attempt
from helpers.processes import unique_marker
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "load"
clients = 2
requests = 8
prompt_tokens = 8
max_tokens = 4
[gate]
ttft_p50_ms = {tol}
"""


def ab(tmp_path: Path, base: str, head: str, tol: float):
    """3 rounds, up to 7 while INCONCLUSIVE; a 200 ms scripted TTFT dwarfs a loaded CPU's noise.
    Once more where the machine starved the client (the first try's results moved aside)."""
    suite = write_suite(tmp_path, SUITE.format(tol=tol))

    def attempt(n: int):
        if n > 1:
            (tmp_path / "results").rename(tmp_path / "starved")
        r = harness("ab", "--quiet", "--suite", str(suite), "--rounds", "3", "--max-rounds", "7",
                    "--base-cmd", base, "--head-cmd", head,
                    cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
        return r, saved_result(tmp_path / "results")

    return valid_attempt(attempt)[0]


def test_a_a_of_two_command_arms_outside_git_passes_with_a_labelled_report(tmp_path):
    assert subprocess.run(["git", "-C", str(tmp_path), "rev-parse"], capture_output=True).returncode
    marker = unique_marker()
    # a relative path: a command runs where harness was started. --bare-health: /health says
    # only {"status": "ok"}, as vLLM's and llama.cpp's do (no config, no commit)
    shutil.copy(SCRIPTED_SERVER, tmp_path / "srv.py")
    cmd = f"{{python}} srv.py --port {{port}} --model {marker} --ttft-ms 200 --bare-health --tag"
    base, head = f"{cmd} a", f"{cmd} b"
    r = ab(tmp_path, base, head, tol=0.2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "error" not in r.stderr
    verdict = r.stdout.split("verdict: ")[1].split()[0]
    assert verdict in ("PASS", "INCONCLUSIVE"), r.stdout  # never a verdict on A/A noise
    (md,) = (tmp_path / "results").glob("*.md")
    assert md.name.endswith("-t-python-tag-a-vs-python-tag-b.md"), md.name
    text = md.read_text()
    assert text.startswith(f"# {verdict}: exit 0")
    assert "base `python --tag a` vs head `python --tag b`" in text
    assert "reported config: (none)" in text and "different machines" not in text
    for png in ("rss", "ttft"):
        assert md.with_name(md.stem + f"-{png}.png").read_bytes().startswith(b"\x89PNG")
    result = md.with_suffix(".json")
    assert all(
        rnd["base"]["server"].get("config") is None
        for rnd in json.loads(result.read_text())["rounds"]
    )

    again = harness(
        "report", str(result), "--out-dir", "again", cwd=tmp_path, env=outside_git(tmp_path)
    )
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert (tmp_path / "again" / md.name).read_text().splitlines()[0] == text.splitlines()[0]
    offline = harness(
        "compare",
        str(result),
        str(result),
        "--out-dir",
        "offline",
        cwd=tmp_path,
        env=outside_git(tmp_path),
    )
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "verdict: PASS" in offline.stdout and list((tmp_path / "offline").glob("*.md"))


def test_scripted_slower_first_token_on_head_is_a_regression_naming_ttft(tmp_path):
    marker = unique_marker()
    base = scripted("--ttft-ms 200 --bare-health", model=marker)
    head = scripted("--ttft-ms 260 --bare-health", model=marker)  # 1.3x
    r = ab(tmp_path, base, head, tol=0.1)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSION: ttft_p50_ms" in r.stdout and "verdict: REGRESSION (exit 1" in r.stdout
    (md,) = (tmp_path / "results").glob("*.md")
    assert md.name.endswith("python-ttft-ms-200-vs-python-ttft-ms-260.md"), md.name
    assert md.read_text().startswith("# REGRESSION: exit 1")


def plans_for(sides: dict[str, Side]) -> dict[str, ArmPlan]:
    return {
        name: ArmPlan(name, make_arm("m", serve_cmd=s.cmd), described("python"))
        for name, s in sides.items()
    }


def test_command_arms_are_labelled_by_their_differing_tokens():
    cmd = "{python} srv.py --port {port} --ttft-ms "
    sides = {"base": Side(cmd=cmd + "40"), "head": Side(cmd=cmd + "52 --x", env="A=1")}
    plans = plans_for(sides)
    label_arms(plans, sides)
    assert plans["base"].desc.label == "python --ttft-ms 40"
    assert plans["head"].desc.label == "python --ttft-ms 52 --x A=1"
    same = {"base": Side(cmd=cmd + "40"), "head": Side(cmd=cmd + "40")}
    plans = plans_for(same)
    label_arms(plans, same)
    assert plans["base"].desc.label == plans["head"].desc.label == "python default"


def labelled(labels: tuple[str, str], sides: dict[str, Side]) -> tuple[str, str]:
    plans = {n: ArmPlan(n, make_arm("m", serve_cmd="x {port}"), described(label))
             for n, label in zip(("base", "head"), labels, strict=True)}  # fmt: skip
    label_arms(plans, sides)
    return plans["base"].desc.label, plans["head"].desc.label


def test_arms_of_two_refs_are_labelled_by_their_flags_too_when_those_differ():
    flags = {"base": Side("HEAD"), "head": Side("WORKTREE", flags="--prefill-max-seqs 4")}
    assert labelled(("HEAD@c4678187", "WORKTREE@c4678187"), flags) == (
        "HEAD@c4678187 default",
        "WORKTREE@c4678187 --prefill-max-seqs 4",
    )
    env = {"base": Side("main", env="A=1"), "head": Side("HEAD", env="A=2")}
    assert labelled(("main@1a2b3c4d", "HEAD@5e6f7a8b"), env) == (
        "main@1a2b3c4d A=1",
        "HEAD@5e6f7a8b A=2",
    )
    # two commits with the same flags: the labels already name what differs
    same = {"base": Side("main", flags="--x 1"), "head": Side("HEAD", flags="--x 1")}
    assert labelled(("main@1a2b3c4d", "HEAD@5e6f7a8b"), same) == ("main@1a2b3c4d", "HEAD@5e6f7a8b")
    # two programs: their whole commands differ, the flags the user gave are what is added
    engine = Side(cmd="python -m engine.cli serve --port {port}", flags="--parallel 4")
    rival = {"base": Side(cmd="llama-server -m m.gguf --port {port}"), "head": engine}
    assert labelled(("llama-server", "python"), rival) == (
        "llama-server default",
        "python --parallel 4",
    )


def metric(ratio: float, lo: float, hi: float, verdict: str = "PASS", ev=None) -> MetricResult:
    """A compared metric as the comparison stores it: `changed` by the gate's own rule."""
    ev_lo, ev_hi = ev or (lo, hi)  # the gate's own bounds: here as wide as the 95% CI
    m = {"name": "ttft_p50_ms", "ratio": ratio, "ci_low": lo, "ci_high": hi, "tolerance": 0.1,
         "verdict": verdict, "method": "t", "base": [1.0], "head": [1.0], "note": "",
         "mde": 1.01, "evidence_low": ev_lo, "evidence_high": ev_hi}  # fmt: skip
    result = MetricResult.from_json(m)
    return dataclasses.replace(result, changed=changed_within_tolerance(result))


def test_a_clear_change_inside_the_tolerance_is_said_on_the_pass_line():
    assert clear_pass(metric(1.076, 1.071, 1.080)) == (
        "PASS: ttft_p50_ms +7.6% [7.1, 8.0], within 10%"
    )
    assert (
        clear_pass(metric(0.95, 0.93, 0.97)) == "PASS: ttft_p50_ms -5.0% [-7.0, -3.0], within 10%"
    )
    assert clear_pass(metric(1.02, 0.99, 1.05)) is None  # the CI holds 1.0: no change shown
    assert clear_pass(metric(1.3, 1.2, 1.4, "REGRESSION")) is None
    # the 95% CI excludes 1 but the gate's own bounds do not: a per-metric 5% claim, not said
    assert clear_pass(metric(1.04, 1.01, 1.07, ev=(0.98, 1.10))) is None
    comparison = Comparison(verdict="PASS", exit_code=0, rounds=3, invalid=[], warnings=[],
                            metrics=[metric(1.076, 1.071, 1.080)])  # fmt: skip
    assert "changed within tolerance: ttft_p50_ms +7.6% [7.1, 8.0], within 10%" in verdict_line(
        headline(comparison)
    )


def test_one_machine_at_two_loads_is_one_machine():
    facts = {"cpu_model": "x", "logical_cores": 2, "memory_bytes": 1, "load_average": [0.5]}
    runs = [{"machine": facts, "summary": {}},
            {"machine": facts | {"load_average": [7.9, 4.0, 2.0]}, "summary": {}}]  # fmt: skip
    rounds = [Round.from_json({"round": 1, "base": runs[0], "head": runs[1]})]
    assert machine_and_load(rounds)[2] == []
    other = {"machine": facts | {"logical_cores": 4}, "summary": {}}
    rounds = [Round.from_json({"round": 1, "base": runs[0], "head": other})]
    assert machine_and_load(rounds)[2] == ["runs report 2 different machines"]
