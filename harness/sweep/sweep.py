"""`harness sweep`: the plan (one phase per load level, built from a suite's phase) and the
rounds that run it, each arm started cold the way `harness ab` starts it (runs/cold.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.load.phase import Progress
from harness.results.ab_result import Crash
from harness.results.record import to_json
from harness.results.run import PhaseMemory, Run
from harness.results.sweep_result import LevelRound, LevelRun, SweepRun
from harness.runs.ab import order, placement
from harness.runs.budget import Budget
from harness.runs.cold import measure_cold
from harness.runs.plan import ArmPlan
from harness.sim.simulated_run import sim_run
from harness.workload.capacity import CapacityPlan
from harness.workload.fingerprint import fingerprint
from harness.workload.levels import level_name, level_phase
from harness.workload.phase import Phase
from harness.workload.suite import Suite

COLD = ("round", "level")
CAPACITY_TOLERANCE = 0.10  # capacity_req_s's tolerance when the suite's [gate] names none
PEAKS = ("peak_rss_bytes", "peak_rss_sampled_bytes", "peak_device_bytes")


class SweepError(ValueError):
    """A sweep that cannot be planned; the message is one line."""


def parse_levels(text: str, mode: str) -> list[float]:
    """`1,2,4,8` -> sorted unique levels; integers >= 1 for concurrency, > 0 req/s for rates."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SweepError(f"levels are comma-separated numbers, got {text!r}") from None
    if not values:
        raise SweepError("give at least one level")
    if mode == "concurrency" and any(v < 1 or v != int(v) for v in values):
        raise SweepError(f"--levels are whole numbers of clients >= 1, got {text!r}")
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise SweepError(f"--rates are requests per second > 0, got {text!r}")
    if len(set(values)) != len(values):
        raise SweepError(f"levels repeat: {text!r}")
    return sorted(int(v) if mode == "concurrency" else v for v in values)


def search_plan(suite: Suite, mode: str, first: float) -> CapacityPlan:
    """--find-capacity's search: the suite's [capacity] table, else doubling from the sweep's
    first level in the sweep's mode. Either needs the suite's [slo] (per-request limits)."""
    if not suite.slo:
        raise SweepError(
            f"--find-capacity needs an [slo] table in suite {suite.name!r}: the per-request "
            "limits a level must meet (ttft_ms, tpot_ms, e2e_ms)"
        )
    return suite.capacity or CapacityPlan(mode=mode, start=first)


def describe(plan: CapacityPlan) -> str:
    unit = "clients" if plan.mode == "concurrency" else "req/s"
    return (
        f"{plan.mode} from {plan.start:g} to at most {plan.most:g} {unit}, within "
        f"{plan.precision:.0%}, at most {plan.steps} levels, {plan.attainment:.0%} of requests "
        "within the [slo]"
    )


@dataclass(frozen=True)
class Sweep:
    """What to run: the suite's first phase reshaped once per level."""

    suite: Suite
    mode: str  # concurrency | rate
    levels: list[float]
    requests: int | None = None  # per level; None = default_requests
    cold: str = "round"  # round: one server per round runs every level; level: one per level
    capacity: CapacityPlan | None = None  # --find-capacity: searched after the levels

    def phase(self, level: float) -> Phase:
        return level_phase(self.suite.phases[0], self.mode, level, self.requests)

    def names(self) -> list[str]:
        return [level_name(v, self.mode) for v in self.levels]

    def units(self) -> list[Suite]:
        """The suites one cold server each runs: all levels in ascending order, or one level;
        with `capacity`, the server that runs the highest level then searches the capacity
        (a suite's own [capacity] table is searched only with --find-capacity)."""
        phases = [self.phase(v) for v in self.levels]
        suite = replace(self.suite, capacity=None)
        if self.cold == "round":
            return [replace(suite, phases=tuple(phases), capacity=self.capacity)]
        units = [replace(suite, phases=(p,)) for p in phases]
        units[-1] = replace(units[-1], capacity=self.capacity)
        return units


def level_runs(run: Run | None, names: list[str]) -> dict[str, LevelRun]:
    """One run -> a per-level record shaped like a run for compare.compare_rounds: the
    level's fingerprint, validity, summary (latency, throughput, memory) and counters."""
    if run is None or run.workload is None or run.phases is None:
        return {}
    facts = {p.name: p for p in run.workload.phases or []}
    startup = {"startup_s": run.server.startup_s if run.server else None}
    out = {}
    for name, phase in run.phases.items():
        if name not in names:
            continue
        memory = phase.memory or PhaseMemory()
        mine = f"phase {name!r}"
        reasons = [  # a reason naming another level's phase is not this level's
            r for r in run.invalid_reasons if not r.startswith("phase ") or r.startswith(mine)
        ]
        out[name] = LevelRun(
            fingerprint=fingerprint(
                {"suite": run.workload.suite, "phases": [to_json(facts[name])]}
            ),
            valid=not reasons,
            invalid_reasons=reasons,
            summary=(phase.stats or {}) | {k: getattr(memory, k) for k in PEAKS} | startup,
            counters=dict((run.counters or {}).get(name, {})),
            memory_source=memory.peak_rss_source,
            simulated=run.simulated,
        )
    return out


@dataclass(frozen=True)
class SweepRuns:
    """What the rounds measured: every run (None where a server never became ready), the
    crash that ended them, and why the budget cut them short."""

    runs: list[SweepRun]
    crash: Crash | None = None
    budget_ended: str = ""


@dataclass
class SweepRunner:
    sweep: Sweep
    plans: dict[str, ArmPlan]
    log_dir: Path
    rounds: int = 3
    ready_timeout_s: float | None = None  # None: the arm's own (its project file's)
    progress: Callable[[str], Progress] = lambda label: Progress()  # noqa: E731
    sim: str | None = None  # a cost model: each unit simulated once instead of served
    devices: tuple[str, ...] = ()  # where arms run, one server at a time: rotated every round
    budget: Budget | None = None  # the job's time: no round starts that would not end inside it
    runs: list[SweepRun] = field(default_factory=list, init=False)  # as run so far
    budget_ended: str = field(default="", init=False)  # said when the budget cut the rounds

    @property
    def steps(self) -> int:
        return self.rounds * len(self.plans) * len(self.sweep.units())

    def run(self) -> SweepRuns:
        """Rounds of cold runs; returns the raw runs and any crash (which ends the sweep)."""
        names, units, done = list(self.plans), self.sweep.units(), 0
        self.runs, walls = [], list[float]()
        crash: Crash | None = None
        runs = self.runs
        for i in range(self.rounds):
            if self.budget is not None and walls and self.budget.rounds_that_fit(walls) < 1:
                self.budget_ended = (f"the budget of {self.budget.minutes:g} min held {i} of "
                                     f"{self.rounds} rounds")  # fmt: skip
                break
            left = self.budget.left_s() if self.budget else 0.0  # a round's cost, as it counts
            where_now = placement(i, names, self.devices)
            plans = {n: replace(p, arm=replace(p.arm, device=where_now[n])) if n in where_now
                     else p for n, p in self.plans.items()}  # fmt: skip
            schedule = [(u, n) for n in order(i, names) for u in units]
            if self.sweep.cold == "level":  # level by level, both arms back to back
                schedule = [(u, n) for u in units for n in order(i, names)]
            for unit, name in schedule:
                done += 1
                where = unit.phases[0].name if len(unit.phases) == 1 else "levels"
                label = f"[{done}/{self.steps}] round {i + 1}/{self.rounds} {name} {where}: "
                if self.sim is not None:  # deterministic: one round, nothing to crash
                    simulated = sim_run(unit, self.plans[name].arm, self.sim)
                    runs.append(SweepRun(round=i + 1, arm=name, run=simulated))
                    continue
                log_dir = self.log_dir / where
                log_dir.mkdir(parents=True, exist_ok=True)
                run, crash = measure_cold(
                    unit, plans[name], log_dir, round_no=i + 1, label=label,
                    progress=self.progress, ready_timeout_s=self.ready_timeout_s,
                )  # fmt: skip
                runs.append(SweepRun(round=i + 1, arm=name, run=run))
                if crash:
                    return SweepRuns(runs, crash)
            walls.append(left - self.budget.left_s() if self.budget else 0.0)
        return SweepRuns(runs, crash, self.budget_ended)


def capacity_record(run: Run | None) -> LevelRun | None:
    """The capacity a run searched, shaped like a level's record for compare.compare_rounds:
    the run's own validity (a level's reasons are that level's), `capacity_req_s`, the search."""
    if run is None or run.capacity is None:
        return None
    found = run.capacity
    reasons = [r for r in run.invalid_reasons if not r.startswith("phase ")]
    if found.error:
        reasons.append(f"capacity search: {found.error}")
    return LevelRun(
        fingerprint=run.fingerprint,
        valid=not reasons,
        invalid_reasons=reasons,
        summary={"capacity_req_s": found.capacity_req_s},
        capacity=found,
    )


def _rounds(records: list[tuple[int, str, LevelRun]]) -> list[LevelRound]:
    """(round, arm, record) -> one LevelRound per round, in round order."""
    by_round: dict[int, dict[str, LevelRun]] = {}
    for n, arm, rec in records:
        by_round.setdefault(n, {})[arm] = rec
    return [LevelRound(round=n, **arms) for n, arms in sorted(by_round.items())]


def rounds_by_level(runs: list[SweepRun], names: list[str]) -> dict[str, list[LevelRound]]:
    """The runs -> per level, its rounds (each arm's record there), for the gate or medians."""
    at: dict[str, list[tuple[int, str, LevelRun]]] = {n: [] for n in names}
    for item in runs:
        for name, rec in level_runs(item.run, names).items():
            at[name].append((item.round or 0, item.arm or "arm", rec))
    return {name: _rounds(records) for name, records in at.items()}


def capacity_rounds(runs: list[SweepRun]) -> list[LevelRound]:
    """The runs -> the rounds of their capacity searches; empty when no run searched."""
    found = [(item.round or 0, item.arm or "arm", capacity_record(item.run)) for item in runs]
    return _rounds([(n, arm, rec) for n, arm, rec in found if rec is not None])
