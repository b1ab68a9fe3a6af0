"""A sweep's judgement: per arm the curve (medians over rounds per level), its knee and goodput;
with two arms a compare.py verdict per level and metric, the first regressing level, whether the
knee moved, and the exit code. Pure: no I/O, no clock."""

from __future__ import annotations

from dataclasses import replace
from statistics import median

from harness.results.ab_result import Crash
from harness.results.comparison import Comparison
from harness.results.errors import ComparisonError
from harness.results.metrics import SUMMARY_KEYS
from harness.results.sweep_result import (
    ArmCapacity,
    Bracket,
    CurvePoint,
    Judgement,
    LevelRound,
    SloRule,
)
from harness.results.verdicts import EXIT_CODES, INVALID
from harness.sim.gate import compare_simulated
from harness.stats.compare import GateRound, compare_gated
from harness.sweep.knee import KNEE_GAIN, Point, Slo, goodput, knee, slo_table

CURVE_METRICS = (*SUMMARY_KEYS, "requests")  # per level: every metric, medians over rounds
CAPACITY = "capacity"  # the capacity search's verdict sits beside the levels' under this name
NO_SEARCH = "no run searched the capacity (the server stopped before the levels ended)"
RANK = (INVALID, "REGRESSION", "INCONCLUSIVE", "IMPROVEMENT", "PASS")


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return float(median(known)) if known else None


def curve(by_level: dict[str, list[LevelRound]], levels: list[float], arm: str) -> list[CurvePoint]:
    """Per level (in the plan's order): medians over the arm's rounds, and its counter deltas."""
    out = []
    for level, (name, rounds) in zip(levels, by_level.items(), strict=True):
        runs = [run for r in rounds if (run := r.of(arm)) is not None]
        series = sorted({s for run in runs for s in run.counters})
        out.append(
            CurvePoint(
                name=name,
                level=level,
                rounds=len(runs),
                valid=all(run.valid for run in runs),
                counters={s: _median([run.counters.get(s) for run in runs]) for s in series},
                medians={m: _median([run.summary.get(m) for run in runs]) for m in CURVE_METRICS},
            )
        )
    return out


def _compare(
    rounds: list[LevelRound], tolerances: dict, slack: float, crash: Crash | None
) -> Comparison:
    complete = [r for r in rounds if r.base is not None and r.head is not None]
    if complete and all(run and run.simulated for r in complete for run in (r.base, r.head)):
        return compare_simulated(_gated(complete[0]), tolerances)
    try:
        return compare_gated([_gated(r) for r in complete or rounds], tolerances, slack,
                             crash=crash)  # fmt: skip
    except ComparisonError as exc:
        if not rounds and crash is None:
            raise
        why = [str(exc)] if rounds else ["no run reached this level"]
        return Comparison.invalid_only(why, len(complete))


def _gated(r: LevelRound) -> GateRound:
    return GateRound(r.round, {"base": r.base, "head": r.head, "null": r.null}, [])


def judge(
    by_level: dict[str, list[LevelRound]],
    levels: list[float],
    arms: list[str],
    tolerances: dict[str, float],
    slack_bytes: float,
    slos: list[Slo],
    crash: Crash | None = None,
    knee_gain: float = KNEE_GAIN,
    capacity: list[LevelRound] | None = None,
    capacity_tolerance: float | None = None,
) -> Judgement:
    """Everything the report and the exit code need. `capacity`: the rounds of the runs'
    capacity searches (sweep.capacity_rounds), gated like a level on capacity_req_s at
    `capacity_tolerance`."""
    names = list(by_level)
    curves = {a: curve(by_level, levels, a) for a in arms}
    knees, goodputs, slo_met = {}, {}, {}
    for a in arms:
        points = [Point(c.level, c.median("tok_s"), c.median("ttft_p95_ms")) for c in curves[a]]
        knees[a] = knee(points, knee_gain)
        goodputs[a] = goodput(levels, curves[a], slos)
        slo_met[a] = slo_table(levels, curves[a], slos) if slos else []
    shape = Judgement(
        verdict="VALID",
        exit_code=0,
        curves=curves,
        knee=knees,
        knee_gain=knee_gain,
        goodput=goodputs,
        slo_met=slo_met,
        slos=[SloRule(metric=s.metric, limit=s.limit, rule=str(s)) for s in slos],
        capacity=None if capacity is None else {a: capacity_of(capacity, a) for a in arms},
    )
    if len(arms) == 1:
        invalid = [
            f"{n}: {why}"
            for n, c in zip(names, curves[arms[0]], strict=True)
            if not c.valid
            for why in _reasons(by_level[n], arms[0])
        ]
        if capacity is not None:  # the run's own reasons are listed at every level already
            seen = {line.split(": ", 1)[1] for line in invalid}
            invalid += [f"{CAPACITY}: {w}" for w in _reasons(capacity, arms[0]) if w not in seen]
            invalid += [] if capacity else [f"{CAPACITY}: {NO_SEARCH}"]
        if crash:
            invalid.insert(0, f"crashed in round {crash.round}: {crash.message}")
        if not any(c.rounds for c in curves[arms[0]]):
            invalid.append("no level produced a run")
        verdict = INVALID if invalid else "VALID"
        return replace(shape, verdict=verdict, exit_code=2 if invalid else 0, invalid=invalid)
    per_level = {n: _compare(by_level[n], tolerances, slack_bytes, crash) for n in names}
    if capacity is not None:  # gated like one more level, after the others
        gate = {"capacity_req_s": capacity_tolerance}
        per_level[CAPACITY] = (
            _compare(capacity, gate, slack_bytes, crash)
            if capacity
            else Comparison.invalid_only([NO_SEARCH])
        )
        names.append(CAPACITY)
    verdicts = [per_level[n].verdict for n in names]
    verdict = next((v for v in RANK if v in verdicts), "PASS")
    first = next((n for n in names if per_level[n].verdict == "REGRESSION"), None)
    worse = []
    if first:
        worse = [m.name for m in per_level[first].metrics if m.verdict == "REGRESSION"]
    return replace(
        shape,
        levels=per_level,
        verdict=verdict,
        exit_code=EXIT_CODES[verdict],
        first_regression=first,
        first_regression_metrics=worse,
        knee_moved=knees["base"] != knees["head"],
        invalid=[f"{n}: {line}" for n in names for line in per_level[n].invalid],
    )


def capacity_of(rounds: list[LevelRound], arm: str) -> ArmCapacity:
    """One arm's searches: the median capacity over its rounds and each round's bracket."""
    found = [run.capacity for r in rounds if (run := r.of(arm)) and run.capacity]
    return ArmCapacity(
        capacity_req_s=_median([f.capacity_req_s for f in found]),
        runs=[
            Bracket(
                met_level=f.met_level,
                missed_level=f.missed_level,
                capacity_req_s=f.capacity_req_s,
                levels=len(f.levels),
            )
            for f in found
        ],
    )


def _reasons(rounds: list[LevelRound], arm: str) -> list[str]:
    return [
        f"round {r.round}: {why}"
        for r in rounds
        if (run := r.of(arm)) is not None
        for why in run.invalid_reasons
    ]
