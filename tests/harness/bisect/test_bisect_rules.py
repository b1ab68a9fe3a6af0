"""`harness bisect`'s pure rules: the halving search (with skipped and unresolved commits), the
metrics it follows, how one step's A/B marks its commit, and the search loop above runs/ab.py."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.bisect.bisect import (
    BisectError,
    Mark,
    confirm_needs_rounds,
    followed_metrics,
    judge_step,
    mark_metrics,
    next_step,
)
from harness.bisect.bisect_report import headline, summary, write_bisect_report
from harness.bisect.bisector import Bisector, Step
from harness.bisect.commits import Commit
from harness.results.ab_result import ABResult
from harness.results.comparison import Comparison, MetricResult
from harness.results.verdicts import EXIT_CODES
from harness.runs.budget import Budget
from harness.runs.plan import Context
from harness.stats.compare import overall_verdict
from harness.workload.suite import load_suite


def search(n: int, culprit: int, broken: frozenset = frozenset(), unsure: frozenset = frozenset()):
    """Run the rule against an oracle: commits >= culprit are bad; `broken` ones are skipped and
    `unsure` ones unresolved. Returns the commits measured, in order, and the final Next."""
    marks, path = {n - 1: Mark.BAD}, []
    while (nxt := next_step(n, marks)).test is not None:
        i = nxt.test
        path.append(i)
        if i in broken:
            marks[i] = Mark.SKIP
        elif i in unsure:
            marks[i] = Mark.UNRESOLVED
        else:
            marks[i] = Mark.BAD if i >= culprit else Mark.GOOD
    return path, nxt


@pytest.mark.parametrize("n", range(1, 40))
def test_every_culprit_is_named_in_at_most_log2_steps(n):
    for culprit in range(n):
        path, nxt = search(n, culprit)
        assert nxt.culprit == culprit and nxt.suspects == (culprit,)
        assert len(path) <= math.ceil(math.log2(n)) if n > 1 else path == []
        assert len(set(path)) == len(path) and n - 1 not in path  # bad is never re-measured


def test_the_path_on_seven_commits_with_the_fourth_bad():
    path, nxt = search(7, 3)
    assert path == [2, 4, 3] and nxt.culprit == 3  # middle (older on a tie), then halves


def test_a_skipped_commit_is_stepped_around_and_the_culprit_still_named():
    path, nxt = search(6, 0, broken=frozenset({2}))
    assert path == [2, 1, 0] and nxt.culprit == 0
    for n in range(3, 20):
        for culprit in range(n):
            for broken in range(n - 1):
                path, nxt = search(n, culprit, broken=frozenset({broken}))
                if broken == culprit - 1 or broken == culprit:
                    # the skipped commit may be the first bad one: both are suspects
                    assert nxt.culprit is None or nxt.culprit == culprit
                    assert culprit in nxt.suspects
                else:
                    assert nxt.culprit == culprit, (n, culprit, broken, path)


def test_an_unresolved_commit_next_to_the_culprit_is_not_guessed():
    path, nxt = search(7, 3, unsure=frozenset({2}))
    assert nxt.culprit is None and nxt.suspects == (2, 3)
    assert path[0] == 2 and 3 in path


def test_every_commit_skipped_leaves_the_whole_range_as_suspects():
    path, nxt = search(5, 2, broken=frozenset(range(4)))
    assert sorted(path) == [0, 1, 2, 3] and nxt.suspects == (0, 1, 2, 3, 4)
    assert nxt.culprit is None


def test_no_commits_is_an_error():
    with pytest.raises(BisectError):
        next_step(0, {})


def metric(name: str, verdict: str, ci=(0.9, 1.1)) -> MetricResult:
    return MetricResult.from_json(saved_metric(name, verdict, ci))


def saved_metric(name: str, verdict: str, ci=(0.9, 1.1)) -> dict:
    """A gated metric as the comparison stores it."""
    lower = name != "tok_s"
    return {"name": name, "verdict": verdict, "ratio": 1.0, "ci_low": ci[0], "ci_high": ci[1],
            "lower_is_better": lower, "tolerance": 0.1, "mde": None, "method": "t",
            "note": ""}  # fmt: skip


def comparison(invalid=(), **verdicts) -> dict:
    metrics = [saved_metric(n, v) for n, v in verdicts.items()]
    verdict = overall_verdict([SimpleNamespace(**m) for m in metrics], list(invalid))
    return {"verdict": verdict, "exit_code": EXIT_CODES[verdict], "invalid": list(invalid),
            "metrics": metrics, "rounds": 3, "warnings": []}  # fmt: skip


def judged(invalid=(), **verdicts) -> Comparison:
    return Comparison.from_json(comparison(invalid, **verdicts))


def test_followed_metrics_default_to_those_that_regress():
    c = judged(ttft_p50_ms="PASS", ttft_p95_ms="REGRESSION", tok_s="INCONCLUSIVE")
    assert followed_metrics(c) == ["ttft_p95_ms"]
    assert followed_metrics(c, ("ttft_p95_ms",)) == ["ttft_p95_ms"]


@pytest.mark.parametrize(
    "c, asked, said",
    [
        (comparison(ttft_p95_ms="PASS", tok_s="INCONCLUSIVE"), (), "does not regress"),
        (comparison(ttft_p95_ms="REGRESSION", tok_s="PASS"), ("tok_s",), "tok_s PASS"),
        (comparison(ttft_p95_ms="REGRESSION"), ("e2e_p50_ms",), "not gated"),
        (comparison(["round 1 head: invalid: x"], ttft_p95_ms="n/a"), (), "invalid"),
    ],
)
def test_nothing_to_bisect_says_why(c, asked, said):
    with pytest.raises(BisectError, match=said):
        followed_metrics(Comparison.from_json(c), asked)


ARM = {"label": "x", "ref": None, "cmd": None, "flags": None, "env": None}


def ab(rnd: dict, crash: dict | None, comparison: dict, **more) -> ABResult:
    """An A/B result of one round, as the runner gives one."""
    return ABResult.from_json({"suite": "s", "created": "2026-12-05T00:00:00+00:00",
                               "base": ARM, "head": ARM, "rounds": [rnd], "crash": crash,
                               "comparison": comparison, **more})  # fmt: skip


def step(verdict: str, crash_arm: str | None = None, head_valid: bool = True) -> ABResult:
    rnd = {"round": 1, "base": {"valid": True, "summary": {}},
           "head": {"valid": head_valid, "summary": {}}}  # fmt: skip
    crash = None
    if crash_arm:
        rnd[crash_arm] = None
        crash = {"arm": crash_arm, "round": 1, "message": f"{crash_arm} exited with code 1"}
    invalid = [] if head_valid and not crash else ["round 1 head: invalid: counters"]
    return ab(rnd, crash, comparison(invalid, ttft_p95_ms=verdict))


@pytest.mark.parametrize(
    "verdict, mark",
    [
        ("REGRESSION", Mark.BAD),
        ("PASS", Mark.GOOD),
        ("IMPROVEMENT", Mark.GOOD),
        ("INCONCLUSIVE", Mark.UNRESOLVED),
        ("n/a", Mark.UNRESOLVED),
    ],
)
def test_a_step_is_marked_by_the_followed_metric(verdict, mark):
    assert judge_step(step(verdict), ["ttft_p95_ms"])[0] == mark


def test_a_wide_interval_short_of_bads_regression_is_good():
    confirmed = {"ttft_p95_ms": metric("ttft_p95_ms", "REGRESSION", (2.4, 9.0)),
                 "tok_s": metric("tok_s", "REGRESSION", (0.2, 0.5))}  # fmt: skip
    wide = [metric("ttft_p95_ms", "INCONCLUSIVE", (0.5, 1.3))]
    assert mark_metrics(wide, ["ttft_p95_ms"])[0] == Mark.UNRESOLVED  # the gate alone: unsure
    assert mark_metrics(wide, ["ttft_p95_ms"], confirmed)[0] == Mark.GOOD
    reaching = [metric("ttft_p95_ms", "INCONCLUSIVE", (0.9, 2.5))]
    assert mark_metrics(reaching, ["ttft_p95_ms"], confirmed)[0] == Mark.UNRESOLVED
    slower = [metric("tok_s", "INCONCLUSIVE", (0.6, 1.1))]  # higher is better: flipped
    assert mark_metrics(slower, ["tok_s"], confirmed)[0] == Mark.GOOD
    assert (
        mark_metrics([metric("tok_s", "INCONCLUSIVE", (0.45, 1.1))], ["tok_s"], confirmed)[0]
        == Mark.UNRESOLVED
    )
    partial = [metric("ttft_p95_ms", "REGRESSION", (1.3, 1.6))]  # a smaller regression is bad
    assert mark_metrics(partial, ["ttft_p95_ms"], confirmed)[0] == Mark.BAD


def test_the_confirmation_adds_rounds_only_while_nothing_is_settled():
    assert confirm_needs_rounds(judged(ttft_p95_ms="INCONCLUSIVE", tok_s="PASS"))
    assert not confirm_needs_rounds(judged(ttft_p95_ms="REGRESSION", tok_s="INCONCLUSIVE"))
    assert confirm_needs_rounds(judged(ttft_p95_ms="REGRESSION", tok_s="INCONCLUSIVE"), ("tok_s",))
    assert not confirm_needs_rounds(judged(["crash"], ttft_p95_ms="INCONCLUSIVE"))


def test_a_candidate_that_cannot_start_or_serve_is_skipped():
    mark, why = judge_step(step("n/a", crash_arm="head"), ["ttft_p95_ms"])
    assert mark == Mark.SKIP and "head exited" in why
    assert judge_step(step("PASS", head_valid=False), ["ttft_p95_ms"])[0] == Mark.SKIP


def test_a_failing_good_arm_stops_the_search():
    with pytest.raises(BisectError, match="good commit failed"):
        judge_step(step("n/a", crash_arm="base"), ["ttft_p95_ms"])


class ScriptedBisector(Bisector):
    """The search loop over made-up A/Bs: commits from `culprit` on regress, `broken` ones
    cannot be built. Only the loop above runs/ab.py is under test here."""

    culprit: int = 0
    broken: frozenset = frozenset()
    unsure: frozenset = frozenset()
    index: dict = {}

    def measure(self, role, base, head, suite, more):
        if head.sha in self.broken:
            return Step(role, base, head, 0.1, None, Mark.SKIP, "install failed")
        bad = self.index[head.sha] >= self.culprit and self.index.get(base.sha, -1) < self.culprit
        verdict = "REGRESSION" if bad else "INCONCLUSIVE" if head.sha in self.unsure else "PASS"
        rnd = {"round": 1, "base": {"valid": True, "summary": {}},
               "head": {"valid": True, "summary": {}}}  # fmt: skip
        gated = {m: "PASS" for m in suite.gate} | {"ttft_p95_ms": verdict}
        return Step(role, base, head, 1.0, ab(rnd, None, comparison(**gated), gate=suite.gate))


def scripted_bisector(
    n: int, culprit: int, broken=(), unsure=()
) -> tuple[ScriptedBisector, list, Commit]:
    good = Commit("g" * 40, "good")
    commits = [Commit(f"{i:040d}", f"commit {i}") for i in range(n)]
    b = ScriptedBisector(Context(load_suite("boundary-spill")), Path("logs"))
    b.culprit, b.index = culprit, {c.sha: i for i, c in enumerate(commits)}
    b.broken = frozenset(commits[i].sha for i in broken)
    b.unsure = frozenset(commits[i].sha for i in unsure)
    return b, commits, good


def test_the_loop_confirms_then_halves_then_measures_the_culprit_against_its_parent():
    b, commits, good = scripted_bisector(7, 3)
    out = b.run(good, commits)
    assert out.metrics == ["ttft_p95_ms"]
    assert [s.role for s in out.steps] == ["confirm", "step", "step", "step"]
    assert [s.head for s in out.steps[1:]] == [commits[2], commits[4], commits[3]]
    assert out.culprit == commits[3]
    assert out.final.role == "final" and out.final.base == commits[2]
    assert out.final.mark == Mark.BAD


def test_the_loop_reuses_the_step_when_the_parent_is_good_and_lists_skips():
    b, commits, good = scripted_bisector(6, 0, broken=[2])
    out = b.run(good, commits)
    assert [(s.head, s.mark) for s in out.steps[1:]] == [
        (commits[2], Mark.SKIP),
        (commits[1], Mark.BAD),
        (commits[0], Mark.BAD),
    ]
    assert out.culprit == commits[0] and out.final is out.steps[-1]


def test_the_loop_refuses_when_bad_does_not_regress():
    b, commits, good = scripted_bisector(4, 99)
    with pytest.raises(BisectError, match="does not regress"):
        b.run(good, commits)


def test_skipped_and_unresolved_neighbours_leave_suspects_and_the_report_says_so(tmp_path):
    b, commits, good = scripted_bisector(7, 3, broken=[1], unsure=[2])
    out = b.run(good, commits)
    assert out.culprit is None and out.final is None
    assert out.suspects == commits[1:4]
    data = summary(out, "boundary-spill", good, "harness bisect ...")
    assert headline(data).startswith("no single first bad commit: it is one of")
    assert [s.head.sha for s in data.skipped] == [commits[1].sha]
    assert [s.head.sha for s in data.unresolved] == [commits[2].sha]
    md = write_bisect_report(data, None, tmp_path)
    text = md.read_text()
    assert md.name.startswith(str(data.created)[:10] + "-bisect-boundary-spill-")
    assert text.startswith("# no single first bad commit")
    assert "unresolved `" + commits[2].short in text and "skipped `" + commits[1].short in text
    assert json.loads(md.with_suffix(".json").read_text())["suspects"][2]["sha"] == commits[3].sha


def test_a_budget_that_cannot_hold_another_step_stops_the_search_naming_what_is_left(tmp_path):
    clock = [0.0]

    class Clocked(Budget):  # the search's time as the scripted A/Bs spend it: 1 s each
        def left_s(self) -> float:
            return self.deadline - clock[0]

    b, commits, good = scripted_bisector(8, 5)
    b.budget = Clocked(1.0, 2.5)
    measure = b.measure
    b.measure = lambda *a: (clock.__setitem__(0, clock[0] + 1.0), measure(*a))[1]
    out = b.run(good, commits)
    assert [s.role for s in out.steps] == ["confirm", "step"]  # 0.5 s left: a third would overrun
    assert out.steps[1].head == commits[3] and out.steps[1].mark == Mark.GOOD
    assert out.culprit is None and out.suspects == commits[4:]
    data = summary(out, "boundary-spill", good, "harness bisect ...")
    assert headline(data) == (
        "the budget of 1 min ended after 2 A/B(s): another would not end inside it: the first "
        f"bad commit is one of {', '.join(c.short for c in commits[4:])}"
    )
    assert write_bisect_report(data, None, tmp_path).read_text().startswith("# the budget of 1")
