"""`harness bisect`'s steps: each one an A/B (runs/ab.py's ABRunner) of a commit against good with
the same suite, rounds and statistics, checked out through the worktree cache; bisect.py's
rules pick the commits and read the verdicts."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.arms.arms import ArmError
from harness.arms.worktrees import RefError
from harness.bisect.bisect import (
    BisectError,
    Mark,
    confirm_needs_rounds,
    followed_metrics,
    judge_step,
    mark_metrics,
    next_step,
    suspects_now,
)
from harness.bisect.commits import Commit
from harness.files import strict_json
from harness.load.phase import Progress
from harness.results.ab_result import ABResult
from harness.results.comparison import Comparison, MetricResult
from harness.results.errors import ComparisonError
from harness.results.verdicts import INVALID
from harness.runs.ab import ABRunner
from harness.runs.budget import Budget
from harness.runs.plan import Context, Side, placed_devices, plan_arm, together
from harness.workload.suite import Suite

MoreRounds = Callable[[Comparison], bool]


@dataclass
class Step:
    """One A/B of the search: `head` against `base` (good, or the culprit's parent at the end)."""

    role: str  # confirm | step | final
    base: Commit
    head: Commit
    wall_s: float
    result: ABResult | None = None  # None when the head arm could not be built
    mark: Mark | None = None
    reason: str = ""

    @property
    def comparison(self) -> Comparison | None:
        """The step's comparison as its record; None when it has no result."""
        return None if self.result is None else self.result.comparison


@dataclass
class BisectOutcome:
    metrics: list[str]
    commits: list[Commit]
    steps: list[Step]  # confirm first, then the search in order
    suspects: list[Commit] = field(default_factory=list)
    culprit: Commit | None = None
    final: Step | None = None
    budget_ended: str = ""  # the search stopped here: its budget could not hold another A/B


@dataclass
class Bisector:
    ctx: Context  # the suite, the repository and its project file, --model, --flags
    log_dir: Path
    rounds: int = 3
    max_rounds: int = 7
    ready_timeout_s: float | None = None  # None: the arm's own (its project file's)
    command: str = ""
    progress: Callable[[str], Progress] = lambda label: Progress()  # noqa: E731
    announce: Callable[[Step, list[str]], None] = lambda step, metrics: None  # noqa: E731
    residency: str | None = None  # --residency; else the project file's (plan.together)
    devices: str | None = None  # --devices; else the project file's (plan.placed_devices)
    budget: Budget | None = None  # the whole search's time: every A/B plans its rounds inside it
    steps: list[Step] = field(default_factory=list, init=False)  # as measured so far
    metrics: list[str] = field(default_factory=list, init=False)  # followed, once confirmed

    def measure(
        self, role: str, base: Commit, head: Commit, suite: Suite, more: MoreRounds
    ) -> Step:
        """One A/B; a head arm that cannot be built or compared comes back with result None."""
        started = time.monotonic()
        plans = {"base": self._plan("base", base, suite)}
        try:
            plans["head"] = self._plan("head", head, suite)
        except (RefError, ArmError) as e:  # a failed build too: that commit is skipped
            return Step(role, base, head, time.monotonic() - started, None, Mark.SKIP, str(e))
        devices = placed_devices(self.devices, self.ctx.project, plans)
        runner = ABRunner(
            suite,
            plans,
            self.log_dir / f"{role}-{head.short}",
            self.rounds,
            self.max_rounds,
            self.ready_timeout_s,
            progress=self.progress,
            more_rounds=more,
            start_together=together(plans, self.residency, devices),
            devices=devices,
            budget=self.budget,
            command=self.command,
        )
        try:
            result = runner.run()
        except ComparisonError as e:
            return Step(role, base, head, time.monotonic() - started, None, Mark.SKIP, str(e))
        # kept as it goes, so an interrupted bisect still shows what each step measured
        runner.log_dir.mkdir(parents=True, exist_ok=True)
        (runner.log_dir / "comparison.json").write_text(strict_json(result.comparison.to_json()))
        return Step(role, base, head, time.monotonic() - started, result)

    def _plan(self, name: str, commit: Commit, suite: Suite):
        return plan_arm(name, Side(commit.sha), dataclasses.replace(self.ctx, suite=suite))

    @property
    def suite(self) -> Suite:
        return self.ctx.suite

    def run(
        self, good: Commit, commits: list[Commit], asked: tuple[str, ...] = ()
    ) -> BisectOutcome:
        """Confirm bad regresses against good, then halve the range until it holds one commit
        (or only skipped and unresolved ones); BisectError when there is nothing to bisect."""
        bad = commits[-1]
        confirm_suite = self._gated(asked) if asked else self.suite
        confirm = self.measure(
            "confirm", good, bad, confirm_suite, lambda c: confirm_needs_rounds(c, asked)
        )
        if confirm.result is None:
            raise BisectError(f"bad {bad.short} cannot be measured: {confirm.reason}")
        self.steps = steps = [confirm]
        confirm_comparison = confirm.comparison
        assert confirm_comparison is not None  # it has a result
        metrics = followed_metrics(confirm_comparison, asked)
        self.metrics = metrics
        confirm.mark, confirm.reason = judge_step(confirm.result, metrics)
        self.announce(confirm, metrics)
        confirmed = {m.name: m for m in confirm_comparison.metrics}

        def unsettled(c: Comparison) -> bool:
            marked = mark_metrics(c.metrics, metrics, confirmed)[0]
            return c.verdict != INVALID and marked == Mark.UNRESOLVED

        suite = self._gated(tuple(metrics))
        marks = {len(commits) - 1: Mark.BAD}
        while (nxt := next_step(len(commits), marks)).test is not None:
            if self.budget and self._out_of_budget():
                left = [commits[i] for i in suspects_now(len(commits), marks)]
                note = (f"the budget of {self.budget.minutes:g} min ended after {len(steps)} "
                        "A/B(s): another would not end inside it")  # fmt: skip
                return BisectOutcome(metrics, commits, steps, left, budget_ended=note)
            step = self.measure("step", good, commits[nxt.test], suite, unsettled)
            if step.result is not None:
                step.mark, step.reason = judge_step(step.result, metrics, confirmed)
            assert step.mark is not None  # a step without a result was skipped
            marks[nxt.test] = step.mark
            steps.append(step)
            self.announce(step, metrics)
        out = BisectOutcome(metrics, commits, steps, [commits[i] for i in nxt.suspects])
        if nxt.culprit is not None:
            out.culprit = commits[nxt.culprit]
            parent = commits[nxt.culprit - 1] if nxt.culprit > 0 else good
            out.final = next((s for s in steps if (s.base, s.head) == (parent, out.culprit)), None)
            if out.final is None:  # the step already measured is the final A/B when parent is good
                out.final = self.measure("final", parent, out.culprit, suite, unsettled)
                self._judge_final(out.final, metrics, confirmed)
                self.announce(out.final, metrics)
        return out

    def _out_of_budget(self) -> bool:
        """Whether the next A/B would not end inside the budget: one as long as the longest
        so far (a step's rounds vary with how soon it decides)."""
        longest = max((s.wall_s for s in self.steps), default=0.0)
        return self.budget is not None and self.budget.left_s() < longest

    def so_far(self, commits: list[Commit]) -> BisectOutcome | None:
        """What an interrupted search had measured: no culprit, every finished step."""
        if not self.steps:
            return None
        return BisectOutcome(self.metrics, commits, list(self.steps), [])

    @staticmethod
    def _judge_final(final: Step, metrics: list[str], confirmed: dict[str, MetricResult]) -> None:
        if final.result is not None:
            try:
                final.mark, final.reason = judge_step(final.result, metrics, confirmed)
            except BisectError as e:  # the parent failed this time: keep the A/B, say so
                final.reason = str(e)

    def _gated(self, metrics: tuple[str, ...]) -> Suite:
        """The suite gating only `metrics` (rounds are added while one of them is INCONCLUSIVE)."""
        unknown = [m for m in metrics if m not in self.suite.gate]
        if unknown:
            gated = ", ".join(self.suite.gate)
            raise BisectError(f"--metric {unknown[0]} is not gated by the suite (gated: {gated})")
        return dataclasses.replace(self.suite, gate={m: self.suite.gate[m] for m in metrics})
