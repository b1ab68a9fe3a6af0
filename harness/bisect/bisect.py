"""`harness bisect`'s rules, pure: which metrics the search follows, what one step's A/B says
about its commit, and which commit to measure next from the marks known so far (git bisect's
halving, with skipped and unresolved commits stepped around, never guessed)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from harness.results.ab_result import ABResult, Round
from harness.results.comparison import Comparison, MetricResult
from harness.results.verdicts import Verdict


class Mark(StrEnum):
    GOOD = "good"  # the followed metrics PASS (or improve) against the good commit
    BAD = "bad"  # a followed metric REGRESSES against the good commit
    SKIP = "skip"  # the commit could not be installed, started or served: not measured
    UNRESOLVED = "unresolved"  # still INCONCLUSIVE at the round cap: not guessed


class BisectError(ValueError):
    """The search cannot start or go on; the message is one line."""


@dataclass(frozen=True)
class Next:
    """What the search does next: measure commit `test`, or stop. When it stops, `suspects` are
    the commits the first bad one may be; `culprit` is set when that is exactly one."""

    test: int | None = None
    suspects: tuple[int, ...] = ()

    @property
    def culprit(self) -> int | None:
        return self.suspects[0] if self.test is None and len(self.suspects) == 1 else None


def next_step(n: int, marks: dict[int, Mark]) -> Next:
    """Commits 0..n-1 run oldest to newest; the good commit sits before 0 and n-1 is bad.

    The first bad commit lies in (last good, first bad after it]. Measure the unmarked commit
    nearest the middle of that range (the older one on a tie), so each step halves it; stop when
    no unmarked commit is left in it."""
    if n < 1:
        raise BisectError("no commits between good and bad")
    lo, hi = _bounds(n, marks)
    open_ = [i for i in range(lo + 1, hi) if i not in marks]
    if not open_:
        return Next(None, tuple(range(lo + 1, hi + 1)))
    mid = (lo + hi) / 2
    return Next(min(open_, key=lambda i: (abs(i - mid), i)))


def suspects_now(n: int, marks: dict[int, Mark]) -> tuple[int, ...]:
    """The commits the first bad one may be, as far as the marks so far say (a search stopped
    before its end: by its budget)."""
    lo, hi = _bounds(n, marks)
    return tuple(range(lo + 1, hi + 1))


def _bounds(n: int, marks: dict[int, Mark]) -> tuple[int, int]:
    lo = max((i for i, m in marks.items() if m == Mark.GOOD), default=-1)
    return lo, min((i for i, m in marks.items() if m == Mark.BAD and i > lo), default=n - 1)


def followed_metrics(comparison: Comparison, asked: tuple[str, ...] = ()) -> list[str]:
    """The metrics the search follows: those asked for, else every gated metric on which bad
    regresses against good. BisectError (the reason) when bad does not regress on them."""
    if comparison.invalid:
        raise BisectError(f"good vs bad is invalid: {'; '.join(comparison.invalid)}")
    verdicts = {m.name: str(m.verdict) for m in comparison.metrics}
    unknown = [a for a in asked if a not in verdicts]
    if unknown:
        raise BisectError(
            f"--metric {unknown[0]} is not gated by the suite (gated: {', '.join(verdicts)})"
        )
    names = list(asked) or [n for n, v in verdicts.items() if v == Verdict.REGRESSION]
    not_regressed = [f"{n} {verdicts[n]}" for n in names if verdicts[n] != Verdict.REGRESSION]
    if not names or not_regressed:
        said = ", ".join(not_regressed or [f"{n} {v}" for n, v in verdicts.items()])
        raise BisectError(f"bad does not regress against good ({said}): nothing to bisect")
    return names


def confirm_needs_rounds(comparison: Comparison, asked: tuple[str, ...] = ()) -> bool:
    """More rounds for the good-vs-bad confirmation while nothing is settled: an asked metric
    is INCONCLUSIVE, or (none asked) no gated metric regresses yet and one is INCONCLUSIVE."""
    if comparison.invalid:
        return False
    verdicts = {m.name: str(m.verdict) for m in comparison.metrics}
    if asked:
        return any(verdicts.get(a) == Verdict.INCONCLUSIVE for a in asked)
    values = set(verdicts.values())
    return Verdict.REGRESSION not in values and Verdict.INCONCLUSIVE in values


def _below_confirmed(m: MetricResult, confirmed: MetricResult | None) -> bool:
    """The candidate's bad-side bound is short of bad's near bound: with 95% confidence it
    does not carry the confirmed regression."""
    if confirmed is None or m.ci_low is None or m.ci_high is None:
        return False
    if m.lower_is_better:
        return confirmed.ci_low is not None and m.ci_high < confirmed.ci_low
    return confirmed.ci_high is not None and m.ci_low > confirmed.ci_high


def mark_metrics(
    metrics: list[MetricResult],
    followed: list[str],
    confirmed: dict[str, MetricResult] | None = None,
) -> tuple[Mark, str]:
    """BAD when a followed metric REGRESSES against good; GOOD when each one PASSES (or improves)
    or its interval excludes bad's confirmed regression (`confirmed`: good-vs-bad's metric
    results by name); UNRESOLVED otherwise."""
    by_name = {m.name: m for m in metrics}
    shown = [by_name[n] for n in followed]
    said = ", ".join(f"{m.name} {m.verdict}" for m in shown)
    if any(m.verdict == Verdict.REGRESSION for m in shown):
        return Mark.BAD, said
    clear = [
        m.verdict in (Verdict.PASS, Verdict.IMPROVEMENT)
        or _below_confirmed(m, (confirmed or {}).get(m.name))
        for m in shown
    ]
    return (Mark.GOOD if all(clear) else Mark.UNRESOLVED), said


def _arm_failed(rounds: list[Round], arm: str) -> bool:
    return any((run := rnd.of(arm)) is None or not run.valid for rnd in rounds)


def judge_step(
    step: ABResult, followed: list[str], confirmed: dict[str, MetricResult] | None = None
) -> tuple[Mark, str]:
    """Mark a candidate from its A/B against good. BisectError when the good arm itself
    failed: nothing can be measured then."""
    crash, rounds = step.crash, step.rounds
    if (crash and crash.arm == "base") or _arm_failed(rounds, "base"):
        why = crash.message if crash and crash.arm == "base" else "an invalid run"
        raise BisectError(f"the good commit failed while measuring a candidate: {why}")
    if crash:
        last = crash.log_tail.strip().splitlines()[-1:]
        return Mark.SKIP, ": ".join([crash.message, *last])
    comparison = step.comparison
    if _arm_failed(rounds, "head"):
        return Mark.SKIP, comparison.invalid[0] if comparison.invalid else "invalid run"
    return mark_metrics(comparison.metrics, followed, confirmed)
