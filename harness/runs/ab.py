"""`harness ab`: two arms (git refs, flag sets or commands), each started cold in rotating
order every round, then gated by stats/compare.py and written up by report/ab_report.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from harness.arms.launcher import LaunchError, reopen, stop_all
from harness.load.baton import Baton
from harness.load.phase import Progress
from harness.results.ab_result import ABResult, Crash, Round
from harness.results.comparison import Comparison, Looks
from harness.results.run import Simulation
from harness.results.store import schema
from harness.results.verdicts import INCONCLUSIVE_EXIT, Verdict
from harness.runs.budget import Budget, budget_note
from harness.runs.cold import Measured, measure_cold, server_log
from harness.runs.measure import Started, start_arm
from harness.runs.plan import ArmPlan
from harness.runs.quiet import CpuClock, load1, round_machine, wait_for_quiet
from harness.stats.compare import (
    ARMS,
    ComparisonError,
    check_fingerprints,
    compare_rounds,
    gate_rounds,
    needs_more_rounds,
)
from harness.stats.rounds_needed import extended
from harness.stats.sequential import Schedule
from harness.workload.fingerprint import workload_diff
from harness.workload.suite import Suite

ARM_NAMES = ("base", "head")


def order(round_index: int, names: list[str]) -> list[str]:
    """Rotate the start each round: AB, BA, AB, ... (ABBA over pairs of rounds)."""
    k = round_index % len(names)
    return names[k:] + names[:k]


def placement(round_index: int, names: list[str], devices: tuple[str, ...]) -> dict[str, str]:
    """The device each arm runs on in a round: one device holds them all (one at a time); with
    several, each arm its own, shifted by one every round, so that over len(devices) rounds
    every arm ran once on every device and a faster device favours none."""
    if len(devices) < 2:
        return dict.fromkeys(names, devices[0]) if devices else {}
    return {n: devices[(j + round_index) % len(devices)] for j, n in enumerate(names)}


@dataclass
class ABRunner:
    suite: Suite
    plans: dict[str, ArmPlan]
    log_dir: Path
    rounds_wanted: int = 3
    max_rounds: int = 9
    ready_timeout_s: float | None = None  # None: the arm's own (its project file's)
    extend_to: int | None = None  # --max-rounds auto: the last look may move out to this
    progress: Callable[[str], Progress] = lambda label: Progress()  # noqa: E731
    more_rounds: Callable[[Comparison], bool] = needs_more_rounds  # on to the next look while true
    measure: Callable[..., Measured] = measure_cold  # one arm, cold, once (a test stubs it)
    start_together: bool = False  # launch a round's arms at once, then measure them in turn
    # (plan.together): by default one at a time, start, measure, stop, then the next
    devices: tuple[str, ...] = ()  # where arms run; two or more: at once, one device each
    budget: Budget | None = None  # the job's time: rounds end inside it (runs/budget.py)
    inconclusive: str = "pass"  # what an undecided gate exits with: 0 (pass) or 1 (fail)
    notes: list[str] = field(default_factory=list)  # said with the verdict (what is not gated)
    command: str = ""  # the command line, as the result keeps it
    quiet_wait_s: float = 0.0  # before each round, wait up to this for a quiet machine
    say: Callable[[str], None] = lambda _: None  # noqa: E731  # a line for the user (the wait)
    # a look that left the gate undecided: (its comparison, the next look, each round's seconds)
    on_look: Callable[[Comparison, int, list[float]], None] = lambda *_: None  # noqa: E731
    rounds: list[Round] = field(default_factory=list, init=False)  # as run so far
    cut_short: bool = field(default=False, init=False)  # the budget took rounds away
    _plan: Schedule | None = field(default=None, init=False)  # once moved by noise or budget

    @property
    def block(self) -> int:
        """Rounds per device cycle: the unit the gate judges over when arms rotate devices."""
        return len(self.devices) if len(self.devices) > 1 else 1

    @property
    def schedule(self) -> Schedule:
        if self._plan is None:
            wanted, most = self.rounds_wanted, max(self.rounds_wanted, self.max_rounds)
            self._plan = Schedule.plan(wanted, most, block=self.block)
        return self._plan

    def run(self) -> ABResult:
        """Rounds up to the first look, then on to the next look while `more_rounds` says a
        metric is undecided (docs/statistics.md, "Sequential stopping"); a workload mismatch or
        an invalid run stops after the round that shows it (the verdict is INVALID whatever
        follows). Each round records its wall time and what else the machine did meanwhile."""
        names = [n for n in ARMS if n in self.plans]
        self.rounds, crash, target, mismatch = [], None, self.schedule.looks[0], None
        rounds = self.rounds
        invalid = False
        while len(rounds) < target and crash is None and mismatch is None and not invalid:
            if self.budget and rounds:
                target = self._fit(target)
                if len(rounds) >= target:
                    break
            waited = wait_for_quiet(self.quiet_wait_s, self.say) if self.quiet_wait_s else 0.0
            i, started, load, clock = len(rounds), time.monotonic(), load1(), CpuClock.now()
            placed = self._placed(i, names)
            devices = {n: p.arm.device for n, p in placed.items() if p.arm.device}
            rounds.append(Round(round=i + 1, order=order(i, names), devices=devices))
            if self.block > 1:  # every arm on its own device, all measured at once
                self._update(launch=list(names))
                crash = self._measure_at_once(i + 1, target, placed)
            else:
                crash = self._measure_in_turn(i + 1, target, placed)
            machine = round_machine(clock, CpuClock.now(), load, waited)
            self._update(wall_s=round(time.monotonic() - started, 3), machine=machine)
            mismatch, invalid = workload_mismatch(rounds), has_invalid_run(rounds[-1])
            decided = len(rounds) < target or crash or mismatch or invalid
            if not decided and self.more_rounds(comparison := self._compare(rounds, None)):
                comparison = self._extended(comparison)
                if upcoming := self.schedule.next_look(target):
                    self.on_look(comparison, upcoming, walls(rounds))
                target = upcoming or target
        return self.outcome(crash, mismatch)

    def _update(self, **fields) -> None:
        """The round under way, with what it has now (a run as soon as it completes: an
        interrupt keeps every finished run)."""
        self.rounds[-1] = replace(self.rounds[-1], **fields)

    def _fit(self, target: int) -> int:
        """The rounds the budget still holds, at the slowest round so far: fewer than planned
        moves the last look in (a round's length says nothing about the metrics, so the gate's
        alpha still holds). Whole device cycles only."""
        done = len(self.rounds)
        if self.budget is None:
            return target
        fits = done + self.budget.rounds_that_fit(walls(self.rounds))
        fits -= fits % self.block
        if fits >= min(target, self.schedule.looks[-1]):
            return target
        self.cut_short = True
        if fits <= done:
            return done
        self._plan = self.schedule.replanned(done, fits)
        return min(target, self._plan.looks[-1])

    def _extended(self, comparison: Comparison) -> Comparison:
        """With --max-rounds auto, the last look moved out to where the undecided metrics'
        measured noise says they resolve (never in: stats/rounds_needed.py); the comparison
        then carries the new looks (what the look's line says is ahead)."""
        if not self.extend_to:
            return comparison
        self._plan = extended(self.schedule, comparison, self.extend_to, self.block)
        return replace(comparison, schedule=Looks.from_json(self._plan.to_dict()))

    def _placed(self, i: int, names: list[str]) -> dict[str, ArmPlan]:
        where = placement(i, names, self.devices)
        return {
            n: replace(p, arm=replace(p.arm, device=where[n])) if n in where else p
            for n, p in self.plans.items()
        }

    def _measure(
        self, rnd: int, target: int, plan: ArmPlan, started=None, progress=None, baton=None
    ) -> Measured:
        label = f"round {rnd}/{target} {plan.name} ({plan.desc.label}) "
        return self.measure(
            self.suite, plan, self.log_dir, round_no=rnd, label=label,
            progress=progress or self.progress, ready_timeout_s=self.ready_timeout_s,
            started=started, **({"baton": baton} if baton else {}),
        )  # fmt: skip

    def _measure_in_turn(self, rnd: int, target: int, placed: dict[str, ArmPlan]) -> Crash | None:
        """The round's arms one after the other in its order; with start_together their
        servers were all started first and their bursts take turns. The first crash ends the
        round."""
        crash, names = None, self.rounds[-1].order or []
        # launched in the order measured: no arm is always the first to start
        self._update(launch=names if self.start_together else [])
        ready = self._start_round(rnd, target, placed, names) if self.start_together else {}
        try:
            if ready:  # started together on one machine: measured at once, taking turns
                return self._measure_at_once(rnd, target, placed, ready)
            for name in names:
                run, crash = self._measure(rnd, target, placed[name])
                self._update(**{name: run})
                if crash:
                    break
        finally:  # a crash or an interrupt leaves no started server behind
            for arm_start in ready.values():
                if isinstance(arm_start, Started):
                    arm_start.launcher.stop()
        return crash

    def _measure_at_once(
        self,
        rnd: int,
        target: int,
        placed: dict[str, ArmPlan],
        ready: dict | None = None,
    ) -> Crash | None:
        """Every arm of the round measured at the same time; the first crash (in the round's
        order) is the round's. Each on its own device; or, with `ready` (their servers started
        together on one machine), one burst (or one phase of another kind) at a time, in the
        round's order, then reversed, ... (ABBA), so that a slow spell of the machine, which
        lasts seconds, falls on both arms (docs/measurement.md)."""
        names = self.rounds[-1].order or []
        baton = Baton(names) if ready is not None else None

        def one(name: str, view) -> Measured:
            if baton is None or ready is None:
                return self._measure(rnd, target, placed[name], progress=view)
            try:
                started = ready.pop(name, None)
                return self._measure(rnd, target, placed[name], started, view, (baton, name))
            finally:
                baton.finish(name)  # the others stop waiting for its turns

        with self.progress(f"round {rnd}/{target} ") as shared:  # one display, a row per arm
            results = _at_once({n: lambda n=n: one(n, shared.view) for n in names})
        if baton is not None:
            self._update(turns=len(baton.taken))
        self._update(**{name: results[name][0] for name in names})
        return next((own for name in names if (own := results[name][1])), None)

    def outcome(self, crash: Crash | None = None, problem: str | None = None) -> ABResult:
        """The result of the rounds run so far; `problem` (a workload mismatch, an interrupt)
        makes it INVALID while keeping every run."""
        comparison = self._compare(self.rounds, crash, problem)
        warnings = [*self.notes, *comparison.warnings]
        if self.cut_short and self.budget and comparison.verdict == Verdict.INCONCLUSIVE:
            note = budget_note(self.budget.minutes, comparison.rounds, comparison.metrics)
            warnings.insert(0, note)
        comparison = undecided(replace(comparison, warnings=warnings), self.inconclusive)
        return ab_result(
            self.suite, self.plans, self.command, rounds=list(self.rounds), crash=crash,
            schedule=self.schedule.to_dict(), comparison=comparison,
        )  # fmt: skip

    def _start_round(
        self, rnd: int, target: int, placed: dict[str, ArmPlan], names: list[str]
    ) -> dict:
        """Every launching arm of the round started at once (their cold starts overlap, so a
        round costs one start, not one per arm): name -> Started, or the LaunchError to report
        when that arm's turn comes. Arms measured at --url are not started."""
        names = [n for n in names if placed[n].arm.launches]
        if len(names) < 2:
            return {}
        label = f"round {rnd}/{target} {' + '.join(names)} "
        with self.progress(label) as bar:
            starts = {
                n: lambda n=n: start_arm(
                    placed[n].arm,
                    server_log(self.log_dir, rnd, n),
                    self.ready_timeout_s,
                    bar.view(f"{label}{n} "),
                )
                for n in names
            }
            return {n: _outcome(f) for n, f in _at_once(starts, futures=True).items()}

    def _compare(
        self, rounds: list[Round], crash: Crash | None, problem: str | None = None
    ) -> Comparison:
        complete = [r for r in rounds if all(r.of(n) is not None for n in ARM_NAMES)]
        problems = [problem] if problem else []
        if crash is not None:
            problems.append(f"arm {crash.arm} crashed in round {crash.round}: {crash.message}")
        try:
            if problem is None and (
                finished(rounds) or crash is None
            ):  # a failed start alone says it all
                return compare_rounds(
                    complete or rounds,
                    self.suite.gate,
                    self.suite.memory_slack_bytes,
                    crash=crash,
                    schedule=self.schedule,
                    block=self.block,
                )
        except ComparisonError as e:
            problems = [str(e), *problems]
        # nothing comparable ran, or it must not be compared: the problem is the whole verdict
        return Comparison.invalid_only(problems, len(complete), self.block)


def _at_once(calls: dict[str, Callable], futures: bool = False) -> dict:
    """Each call in its own thread, all at once: name -> its result (or its Future). An
    interrupt stops every server this process started before it is raised."""
    pool = ThreadPoolExecutor(len(calls))
    done = {n: pool.submit(call) for n, call in calls.items()}
    try:
        wait(done.values())
    except BaseException:  # interrupted: no start still under way may outlive us
        stop_all()  # kills what started; a start not yet launched is refused
        pool.shutdown(wait=True)
        reopen()
        raise
    pool.shutdown()
    return done if futures else {n: f.result() for n, f in done.items()}


def _outcome(future: Future) -> Started | LaunchError:
    """A start's result; any failure is that arm's launch failure (reported in its turn)."""
    try:
        return future.result()
    except LaunchError as e:
        return e
    except Exception as e:  # e.g. an unwritable log folder: still this arm's start failing
        return LaunchError(f"cannot start server: {type(e).__name__}: {e}")


def has_invalid_run(rnd: Round) -> bool:
    return any(run is not None and not run.valid for run in map(rnd.of, ARMS))


def finished(rounds: list[Round]) -> list[Round]:
    """The rounds in which at least one arm's run finished."""
    return [r for r in rounds if any(map(r.of, ARMS))]


def walls(rounds: list[Round]) -> list[float]:
    """Each round's seconds (one still under way counts none)."""
    return [r.wall_s or 0.0 for r in rounds]


def workload_mismatch(rounds: list[Round]) -> str | None:
    """Why the runs so far are not the same workload, naming what differs; None if they are."""
    ran = finished(rounds)
    if not ran:  # nothing ran yet (a start failed): nothing to compare, no mismatch
        return None
    try:
        check_fingerprints(gate_rounds(ran))
    except ComparisonError as e:
        runs = [run for r in ran for run in map(r.of, ARMS) if run is not None]
        diff = next(
            (d for run in runs[1:] if (d := workload_diff(runs[0].workload, run.workload))), []
        )
        return f"{e}" + (f" ({'; '.join(diff)})" if diff else "")
    return None


def undecided(comparison: Comparison, choice: str) -> Comparison:
    """The team's choice for a gate that could not decide: with "fail", INCONCLUSIVE exits 1
    (the verdict stays what it is, and the result says why it failed)."""
    code = INCONCLUSIVE_EXIT[choice]
    if comparison.verdict != Verdict.INCONCLUSIVE or code == comparison.exit_code:
        return comparison
    why = "INCONCLUSIVE fails this gate (--inconclusive fail)"
    return replace(comparison, exit_code=code, warnings=[why, *comparison.warnings])


def ab_result(
    suite: Suite,
    plans: dict[str, ArmPlan],
    command: str,
    *,
    rounds: list[Round],
    crash: Crash | None,
    schedule: dict | None,
    comparison: Comparison,
    simulated: Simulation | None = None,
) -> ABResult:
    """The A/B result of the rounds run and their comparison: what every view shows and
    `harness ab` saves."""
    return ABResult(
        schema=schema("ab"),
        suite=suite.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        base=plans["base"].desc,
        head=plans["head"].desc,
        null_arm="null" in plans,
        gate=dict(suite.gate),
        memory_slack_bytes=suite.memory_slack_bytes,
        command=command,
        rounds=rounds,
        crash=crash,
        schedule=schedule,
        comparison=comparison,
        simulated=simulated,
    )
