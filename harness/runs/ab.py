"""`harness ab`: two arms (git refs, flag sets or commands), each started cold in rotating
order every round, then gated by stats/compare.py and written up by report/ab_report.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.arms.launcher import LaunchError, reopen, stop_all
from harness.load.phase import Progress
from harness.results.store import schema
from harness.results.verdicts import EXIT_CODES, INVALID
from harness.runs.cold import Measured, measure_cold, server_log
from harness.runs.measure import Started, start_arm
from harness.runs.plan import ArmPlan
from harness.stats.compare import (
    Comparison,
    ComparisonError,
    check_fingerprints,
    compare_rounds,
    needs_more_rounds,
)
from harness.stats.sequential import Schedule
from harness.workload.fingerprint import workload_diff
from harness.workload.suite import Suite

ARM_NAMES = ("base", "head")


def order(round_index: int, names: list[str]) -> list[str]:
    """Rotate the start each round: AB, BA, AB, ... (ABBA over pairs of rounds)."""
    k = round_index % len(names)
    return names[k:] + names[:k]


@dataclass
class ABRunner:
    suite: Suite
    plans: dict[str, ArmPlan]
    log_dir: Path
    rounds_wanted: int = 3
    max_rounds: int = 9
    ready_timeout_s: float = 120.0
    progress: Callable[[str], Progress] = lambda label: Progress()  # noqa: E731
    more_rounds: Callable[[Comparison], bool] = needs_more_rounds  # on to the next look while true
    measure: Callable[..., Measured] = measure_cold  # one arm, cold, once (a test stubs it)
    start_together: bool = False  # launch a round's arms at once, then measure them in turn
    # (plan.together): by default one at a time, start, measure, stop, then the next
    notes: list[str] = field(default_factory=list)  # said with the verdict (what is not gated)
    rounds: list[dict] = field(default_factory=list, init=False)  # as run so far

    @property
    def schedule(self) -> Schedule:
        return Schedule.plan(self.rounds_wanted, max(self.rounds_wanted, self.max_rounds))

    def run(self) -> dict:
        """Rounds up to the first look, then on to the next look while `more_rounds` says a
        metric is undecided (docs/statistics.md, "Sequential stopping"); a workload mismatch or
        an invalid run stops after the round that shows it (the verdict is INVALID whatever
        follows). Each round records its wall time."""
        names = [n for n in ("base", "head", "null") if n in self.plans]
        self.rounds, crash, target, mismatch = [], None, self.rounds_wanted, None
        rounds = self.rounds
        invalid = False
        while len(rounds) < target and crash is None and mismatch is None and not invalid:
            i, started = len(rounds), time.monotonic()
            record = {"round": i + 1, "order": order(i, names), "null": None}
            record |= dict.fromkeys(names)  # each filled in as its run completes
            rounds.append(record)
            # launched in the order measured: no arm is always the first to start
            record["launch"] = record["order"] if self.start_together else []
            ready = self._start_round(i + 1, target, record["order"]) if self.start_together else {}
            try:
                for name in record["order"]:
                    label = f"round {i + 1}/{target} {name} ({self.plans[name].desc['label']}) "
                    record[name], crash = self.measure(
                        self.suite, self.plans[name], self.log_dir, round_no=i + 1, label=label,
                        progress=self.progress, ready_timeout_s=self.ready_timeout_s,
                        started=ready.pop(name, None),
                    )  # fmt: skip
                    if crash:
                        break
            finally:  # a crash or an interrupt leaves no started server behind
                for arm_start in ready.values():
                    if isinstance(arm_start, Started):
                        arm_start.launcher.stop()
            record["wall_s"] = round(time.monotonic() - started, 3)
            mismatch, invalid = workload_mismatch(rounds), has_invalid_run(record, names)
            decided = len(rounds) < target or crash or mismatch or invalid
            if not decided and self.more_rounds(self._compare(rounds, None)):
                target = self.schedule.next_look(target) or target
        return self.outcome(crash, mismatch)

    def outcome(self, crash: dict | None = None, problem: str | None = None) -> dict:
        """The result of the rounds run so far; `problem` (a workload mismatch, an interrupt)
        makes it INVALID while keeping every run."""
        comparison = self._compare(self.rounds, crash, problem)
        comparison.warnings = [*self.notes, *comparison.warnings]
        return {
            "rounds": self.rounds,
            "crash": crash,
            "schedule": self.schedule.to_dict(),
            "comparison": comparison.to_dict(),
        }

    def _start_round(self, rnd: int, target: int, names: list[str]) -> dict:
        """Every launching arm of the round started at once (their cold starts overlap, so a
        round costs one start, not one per arm): name -> Started, or the LaunchError to report
        when that arm's turn comes. Arms measured at --url are not started."""
        names = [n for n in names if self.plans[n].arm.launches]
        if len(names) < 2:
            return {}
        label = f"round {rnd}/{target} {' + '.join(names)} "
        pool = ThreadPoolExecutor(len(names))
        with self.progress(label) as bar:
            futures = {
                n: pool.submit(
                    start_arm,
                    self.plans[n].arm,
                    server_log(self.log_dir, rnd, n),
                    self.ready_timeout_s,
                    bar,
                )
                for n in names
            }
            try:
                wait(futures.values())
            except BaseException:  # interrupted: no start still under way may outlive us
                stop_all()  # kills what started; a start not yet launched is refused
                pool.shutdown(wait=True)
                reopen()
                raise
        pool.shutdown()
        return {n: _outcome(f) for n, f in futures.items()}

    def _compare(
        self, rounds: list[dict], crash: dict | None, problem: str | None = None
    ) -> Comparison:
        complete = [r for r in rounds if all(r.get(n) is not None for n in ARM_NAMES)]
        problems = [problem] if problem else []
        if crash is not None:
            problems.append(
                f"arm {crash['arm']} crashed in round {crash['round']}: {crash['message']}"
            )
        try:
            if problem is None:
                return compare_rounds(
                    complete or rounds,
                    self.suite.gate,
                    self.suite.memory_slack_bytes,
                    crash=crash,
                    schedule=self.schedule,
                )
        except ComparisonError as e:
            problems = [str(e), *problems]
        # nothing comparable ran, or it must not be compared: the problem is the whole verdict
        n = len(complete)
        return Comparison(INVALID, EXIT_CODES[INVALID], n, "", [], invalid=problems)


def _outcome(future: Future) -> Started | LaunchError:
    """A start's result; any failure is that arm's launch failure (reported in its turn)."""
    try:
        return future.result()
    except LaunchError as e:
        return e
    except Exception as e:  # e.g. an unwritable log folder: still this arm's start failing
        return LaunchError(f"cannot start server: {type(e).__name__}: {e}")


def has_invalid_run(record: dict, names: list[str]) -> bool:
    return any(record.get(n) and not record[n].get("valid", False) for n in names)


def workload_mismatch(rounds: list[dict]) -> str | None:
    """Why the runs so far are not the same workload, naming what differs; None if they are."""
    try:
        check_fingerprints([r for r in rounds if any(r.get(a) for a in ("base", "head", "null"))])
    except ComparisonError as e:
        runs = [r[a] for r in rounds for a in ("base", "head", "null") if r.get(a)]
        diff = next(
            (d for run in runs[1:] if (d := workload_diff(runs[0].get("workload") or {},
                                                         run.get("workload") or {}))),
            [],
        )  # fmt: skip
        return f"{e}" + (f" ({'; '.join(diff)})" if diff else "")
    return None


def ab_result(suite: Suite, plans: dict[str, ArmPlan], outcome: dict, command: str) -> dict:
    return {
        "schema": schema("ab"),
        "suite": suite.name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "base": plans["base"].desc,
        "head": plans["head"].desc,
        "null_arm": "null" in plans,
        "gate": suite.gate,
        "memory_slack_bytes": suite.memory_slack_bytes,
        "command": command,
        **outcome,
    }
