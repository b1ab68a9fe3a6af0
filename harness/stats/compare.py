"""Gate statistics: rounds of paired base/head runs -> per-metric verdicts, an overall verdict
and the exit code a CI job gates on. Pure: no I/O, no clock (docs/statistics.md has the rules)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import median
from typing import Protocol

from harness.results.ab_result import Crash, Round
from harness.results.comparison import Comparison, Looks, MetricResult
from harness.results.errors import ComparisonError
from harness.results.metrics import CATALOGUE, Method, metric
from harness.results.verdicts import EXIT_CODES, INVALID, MOST_ROUNDS, Verdict
from harness.stats.interval import detectable_shift, paired_logs, ratio_interval, t_bounds
from harness.stats.rounds_needed import rounds_needed
from harness.stats.sequential import Schedule
from harness.stats.verdict import changed_within_tolerance, peak_verdict, ratio_verdict

ARMS = ("base", "head", "null")


class Gated(Protocol):
    """What the gate reads of one run (a saved run, a sweep's level of one): its workload,
    validity and summary."""

    @property
    def fingerprint(self) -> str | None: ...
    @property
    def valid(self) -> bool: ...
    @property
    def invalid_reasons(self) -> list[str]: ...
    @property
    def summary(self) -> dict[str, float | None]: ...


@dataclass(frozen=True, slots=True)
class GateRound:
    """One round as the gate reads it: each arm it names (None: that arm has no run there) and
    the order the arms were measured in."""

    round: int
    runs: dict[str, Gated | None]
    order: list[str]

    def run(self, arm: str) -> Gated | None:
        return self.runs.get(arm)

    def pair(self, arm: str) -> tuple[Gated, Gated] | None:
        """(base's run, `arm`'s run) when the round has both."""
        base, other = self.run("base"), self.run(arm)
        return None if base is None or other is None else (base, other)


def gate_rounds(rounds: list[Round] | list[dict]) -> list[GateRound]:
    """Live or saved rounds read once into what the gate reads (a saved round, as JSON, is
    read into its record first: every field checked)."""
    read = [r if isinstance(r, Round) else Round.from_json(r, f"rounds[{i}]")
            for i, r in enumerate(rounds)]  # fmt: skip
    return [GateRound(r.round, {a: r.of(a) for a in ARMS}, list(r.order or [])) for r in read]


def blocked(values: list[float], size: int) -> list[float]:
    """The geometric mean of each whole block of `size` consecutive rounds (a trailing partial
    block is left out). Rounds that rotate the arms over `size` devices form a block in which
    each arm ran once on each device, so a device's speed cancels inside it."""
    if size <= 1:
        return list(values)
    whole = len(values) - len(values) % size
    chunks = [values[i : i + size] for i in range(0, whole, size)]
    return [math.exp(sum(math.log(v) for v in c) / size) for c in chunks]


def compare_metric(*args, **kwargs) -> MetricResult:
    """Judge one metric over paired rounds (`measured`), with what every view says of it
    computed once (`judged`)."""
    return judged(measured(*args, **kwargs))


def measured(
    name: str,
    base: list[float | None],
    head: list[float | None],
    tolerance: float,
    slack_bytes: float = 0,
    *,
    seed: int = 0,
    alpha: float | None = None,
    block: int = 1,
    later: list[bool] | None = None,
) -> MetricResult:
    """Judge one metric over paired rounds (base[i] and head[i] ran in the same round).
    With `alpha`, a REGRESSION needs the one-sided (1 - alpha) t-bound past 1, not the 95% CI.
    With `block`, an interval metric is judged over blocks of rounds (`blocked`). With `later`
    (per round: head was measured after base), the order effect is fitted and taken out where
    there are enough rounds in each order (interval.paired_logs)."""
    entry = metric(name)
    lower, memory = entry.lower_is_better, entry.memory_peak
    result = MetricResult(
        name=name,
        base=list(base),
        head=list(head),
        ratio=None,
        ci_low=None,
        ci_high=None,
        tolerance=tolerance,
        verdict=Verdict.NA,
        mde=None,
        method=entry.method,
        lower_is_better=lower,
        note="",
        base_value=entry.centre(base),
        head_value=entry.centre(head),
    )
    if any(v is None for v in [*base, *head]):
        return replace(result, note="not reported by every run")
    known = [float(v) for v in base if v is not None], [float(v) for v in head if v is not None]
    if memory:
        return _peaks(result, *known, slack_bytes)
    b, h = known
    if min(*b, *h) <= 0:
        return replace(result, note="ratio undefined: non-positive values")
    b, h = blocked(b, block), blocked(h, block)
    if block > 1:  # a whole device cycle holds each order alike
        later = None
        if len(b) < 2:
            return replace(result, note=f"fewer than two whole device cycles of {block} rounds")
    fit = paired_logs(b, h, later)
    iv = ratio_interval(fit, seed=seed)
    order = math.exp(fit.order_effect) if fit.order_effect is not None else None
    result = replace(
        result,
        spread=fit.spread,
        order_effect=order,
        ratio=iv.ratio,
        ci_low=iv.ci_low,
        ci_high=iv.ci_high,
        mde=iv.mde,
        method=iv.method,
    )
    evidence = t_bounds(fit, alpha) if alpha is not None else None
    if alpha is not None and evidence is not None:
        limit = math.log1p(tolerance) if lower else -math.log1p(-tolerance)
        shift = detectable_shift(fit, alpha, limit)
        result = replace(
            result,
            alpha=alpha,
            evidence_low=evidence[0],
            evidence_high=evidence[1],
            detectable=None if shift is None else math.exp(shift if lower else -shift),
        )
    verdict = ratio_verdict(iv.ratio, iv.ci_low, iv.ci_high, tolerance, lower, evidence=evidence)
    return replace(result, verdict=verdict)


def _peaks(result: MetricResult, base: list[float], head: list[float], slack: float):
    """A memory peak by the min/max rule; its ratio of medians and the range of ratios."""
    verdict = peak_verdict(base, head, result.tolerance, slack)
    if min(base) <= 0:
        return replace(result, verdict=verdict)
    return replace(
        result,
        verdict=verdict,
        ratio=median(head) / median(base),
        ci_low=min(head) / max(base),
        ci_high=max(head) / min(base),
        # the smallest head/base ratio the min/max rule would flag
        mde=(max(base) * (1 + result.tolerance) + slack) / median(base),
    )


def check_fingerprints(rounds: list[GateRound]) -> str:
    """The one workload fingerprint shared by every run; ComparisonError otherwise."""
    seen: dict[str, list[str]] = {}
    for rnd in rounds:
        for arm in ARMS:
            run = rnd.run(arm)
            if run is not None:
                fp = run.fingerprint or "<missing>"
                seen.setdefault(fp, []).append(f"round {rnd.round} {arm}")
    if not seen:
        raise ComparisonError("no run finished: nothing to compare")
    if len(seen) != 1 or "<missing>" in seen:
        detail = "; ".join(f"{fp}: {', '.join(where)}" for fp, where in seen.items())
        raise ComparisonError(
            f"runs of different workloads are never compared (fingerprints differ): {detail}"
        )
    return next(iter(seen))


def invalid_runs(rounds: list[GateRound], crash: Crash | None = None) -> list[str]:
    """One line per missing or invalid run, and one for a crashed arm."""
    problems = []
    if crash:
        why = f" in round {crash.round}: {crash.message}" if crash.message else ""
        problems.append(f"arm {crash.arm} crashed{why}")
    for rnd in rounds:
        for arm, run in rnd.runs.items():
            if run is None and arm != "null":
                problems.append(f"round {rnd.round} {arm}: no run")
            elif run is not None and not run.valid:
                reasons = "; ".join(run.invalid_reasons or ["no reason given"])
                problems.append(f"round {rnd.round} {arm}: invalid: {reasons}")
    return problems


def interval_metrics(tolerances: dict[str, float]) -> list[str]:
    """The gated metrics judged by an interval (memory peaks use the min/max rule): the
    false-regression budget of each look is split among these."""
    return [name for name in tolerances if not metric(name).memory_peak]


def _metrics(
    rounds: list[GateRound],
    arm: str,
    tolerances: dict[str, float],
    slack_bytes: float,
    seed: int,
    schedule: Schedule,
    block: int = 1,
) -> list[MetricResult]:
    kept = [r for r in rounds if r.pair(arm)]
    paired = [p for r in kept if (p := r.pair(arm))]
    if not paired:
        return []
    alpha = schedule.metric_alpha(len(paired), len(interval_metrics(tolerances)))
    later = measured_later(kept, arm)
    out = []
    for name, tol in tolerances.items():
        base = [b.summary.get(name) for b, _ in paired]
        other = [o.summary.get(name) for _, o in paired]
        out.append(compare_metric(name, base, other, tol, slack_bytes, seed=seed, alpha=alpha,
                                  block=block, later=later))  # fmt: skip
    return out


def judged(result: MetricResult) -> MetricResult:
    """`result` with what every view says of it computed once: the rounds an unchanged head
    needs at its noise, and whether a PASS is a change within tolerance."""
    planned = rounds_needed(result)
    if planned is not None:
        rounds = MOST_ROUNDS + 1 if planned[0] is None else planned[0]
        result = replace(result, rounds_to_pass=rounds)
    return replace(result, changed=changed_within_tolerance(result))


def measured_later(rounds: list[GateRound], arm: str) -> list[bool] | None:
    """Per round, whether `arm` was measured after base (the round's `order`); None when a
    round does not say."""
    orders = [r.order for r in rounds]
    if not all("base" in o and arm in o for o in orders):
        return None
    return [o.index(arm) > o.index("base") for o in orders]


def overall_verdict(metrics: list[MetricResult], invalid: list[str]) -> str:
    verdicts = {m.verdict for m in metrics}
    for outcome in (INVALID, Verdict.REGRESSION, Verdict.INCONCLUSIVE, Verdict.IMPROVEMENT):
        if outcome in verdicts or (outcome == INVALID and invalid):
            return str(outcome)
    return str(Verdict.PASS)


def ungated(
    rounds: list[GateRound], tolerances: dict[str, float], seed: int, block: int = 1
) -> list[MetricResult]:
    """The interval metrics the suite does not gate, compared over the paired rounds where every
    run measured them (at least two): stored so a report can show what moved, never judged."""
    kept = [r for r in rounds if r.pair("head")]
    pairs = [p for r in kept if (p := r.pair("head"))]
    later = measured_later(kept, "head")
    out = []
    for m in CATALOGUE:
        if m.name in tolerances or not m.gateable or m.memory_peak:
            continue
        base = [b.summary.get(m.name) for b, _ in pairs]
        head = [h.summary.get(m.name) for _, h in pairs]
        if len(base) < 2 * block or any(v is None or v <= 0 for v in [*base, *head]):
            continue
        result = compare_metric(m.name, base, head, 0.0, seed=seed, block=block, later=later)
        out.append(replace(result, verdict=Verdict.NA, note="not gated", changed=False))
    return out


def compare_rounds(
    rounds: list[Round] | list[dict],
    tolerances: dict[str, float],
    slack_bytes: float = 0,
    *,
    crash: Crash | None = None,
    seed: int = 0,
    schedule: Schedule | None = None,
    block: int = 1,
) -> Comparison:
    """Rounds `[{"round", "order", "base", "head", "null"}]` of run records -> a Comparison
    (`compare_gated`, once they are read).

    Every metric in `tolerances` is gated; the null arm, where present, is judged the same way
    against base and reported as the noise floor. A REGRESSION must clear the alpha that
    `schedule` gives this look (default: one look at these rounds, the whole 1% budget);
    `block` > 1 judges interval metrics over whole device cycles (`blocked`).
    Raises ComparisonError for mixed workloads."""
    return compare_gated(
        gate_rounds(rounds), tolerances, slack_bytes, crash=crash, seed=seed, schedule=schedule,
        block=block,
    )  # fmt: skip


def compare_gated(
    rounds: list[GateRound],
    tolerances: dict[str, float],
    slack_bytes: float = 0,
    *,
    crash: Crash | None = None,
    seed: int = 0,
    schedule: Schedule | None = None,
    block: int = 1,
) -> Comparison:
    """compare_rounds on rounds already read (a sweep's levels hand theirs over as they are)."""
    if not rounds:
        raise ComparisonError("no rounds to compare")
    for name, tol in tolerances.items():
        if not 0 <= tol < 1:
            raise ComparisonError(f"tolerance for {name} must be in [0, 1), got {tol}")
        try:
            metric(name)
        except ValueError as err:
            raise ComparisonError(str(err)) from None
    fingerprint = check_fingerprints(rounds)
    invalid = invalid_runs(rounds, crash)
    n = sum(1 for r in rounds if r.pair("head"))
    if n == 0 and not invalid:
        raise ComparisonError("no round has both a base and a head run")
    schedule = schedule or Schedule.single(max(n, 1))
    metrics = _metrics(rounds, "head", tolerances, slack_bytes, seed, schedule, block)
    noise = _metrics(rounds, "null", tolerances, slack_bytes, seed, schedule, block)
    verdict = overall_verdict(metrics, invalid)
    return Comparison(
        verdict=verdict,
        exit_code=EXIT_CODES[verdict],
        rounds=n,
        fingerprint=fingerprint,
        metrics=metrics,
        noise=noise,
        invalid=invalid,
        warnings=[],
        ungated=ungated(rounds, tolerances, seed, block),
        schedule=Looks.from_json(schedule.to_dict()),
        block=block,
    )


def needs_more_rounds(result: Comparison) -> bool:
    """True when a gated metric is INCONCLUSIVE, or a PASS whose IMPROVEMENT is pending, and
    more rounds could settle it. An INVALID or REGRESSION comparison is decided: it stops at
    once (every look spends its own alpha, so stopping early keeps the gate's false-regression
    rate)."""
    if result.verdict in (INVALID, Verdict.REGRESSION):
        return False
    return any(m.verdict == Verdict.INCONCLUSIVE or _pending(m) for m in result.metrics)


def _pending(m: MetricResult) -> bool:
    """A PASS that the 95% CI alone would call an IMPROVEMENT: the look's stricter bound is
    what is missing, and more rounds can bring it (the mirror of an INCONCLUSIVE)."""
    interval = m.method in (Method.T, Method.BOOTSTRAP)
    if m.verdict != Verdict.PASS or not interval or m.ratio is None or m.ci_low is None:
        return False
    by_ci = ratio_verdict(m.ratio, m.ci_low, m.ci_high, m.tolerance, m.lower_is_better)
    return by_ci == Verdict.IMPROVEMENT


def next_look(result: Comparison, schedule: Schedule) -> int | None:
    """The round count of the next look when this look left the gate undecided, else None:
    the whole stopping rule (harness ab's round loop and the simulated gates both use it)."""
    return schedule.next_look(result.rounds) if needs_more_rounds(result) else None


def judged_again(comparison: Comparison) -> Comparison:
    """A saved comparison from before its metrics carried `rounds_to_pass` and `changed`, with
    them computed from the fields it kept (a re-rendered report says what a new one says)."""
    return replace(comparison, metrics=[m if m.changed is not None else judged(m)
                                        for m in comparison.metrics])  # fmt: skip
