"""What a comparison says in words, computed once from its record and shown by every view (the
terminal, the report, the pull request's summary): the verdict's words, what paid for what in
a trade-off, the one reason a heading gives, the metrics that moved and changed, and the
warnings. stats/ returns numbers and verdicts only; the words are written here."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from harness.results.comparison import Comparison, MetricResult
from harness.results.metrics import Method
from harness.results.verdicts import INVALID, MOST_ROUNDS, Verdict, exit_meaning

MOVED = {  # verdict -> how the first line lists its metrics
    Verdict.REGRESSION: "regressed",
    Verdict.INCONCLUSIVE: "inconclusive (see warnings)",
    Verdict.IMPROVEMENT: "improved",
}


@dataclass(frozen=True)
class Headline:
    verdict: str
    exit_code: int
    words: str  # `REGRESSION (trade-off)` when a regression bought an improvement
    trade_off: str | None  # `tpot_ms +285% paid for ttft_p50_ms 0.52x`
    meaning: str  # what the exit code says
    why: str  # the one reason a heading gives beside the verdict
    moved: dict[str, list[tuple[str, float | None]]]  # MOVED's word -> (metric, ratio)
    changed: list[tuple[str, str]]  # (metric, `+7.6% [7.1, 8.0], within 10%`) of a changed PASS
    warnings: list[str]  # what the reader must know beside the verdict
    invalid: list[str]

    @property
    def line(self) -> str:
        """The terminal's last line: `verdict: REGRESSION (trade-off): ... (exit 1: ...)`."""
        said = f"{self.words}: {self.trade_off}" if self.trade_off else self.verdict
        return f"verdict: {said} (exit {self.exit_code}: {self.meaning})"


def headline(c: Comparison) -> Headline:
    trade = trade_off(c)
    moved: dict[str, list[tuple[str, float | None]]] = {}
    for m in c.metrics:
        if m.verdict in MOVED and not (trade and m.verdict != Verdict.INCONCLUSIVE):
            moved.setdefault(MOVED[m.verdict], []).append((m.name, m.ratio))
    return Headline(
        verdict=c.verdict,
        exit_code=c.exit_code,
        words=f"{c.verdict} (trade-off)" if trade else str(c.verdict),
        trade_off=trade,
        meaning=exit_meaning(c.exit_code, simulated(c), c.verdict),
        why=trade or _why(c),
        moved=moved,
        changed=[(m.name, said) for m in c.metrics if (said := clear_change(m))],
        warnings=gate_warnings(c),
        invalid=list(c.invalid),
    )


def simulated(c: Comparison) -> bool:
    return any(m.method == Method.SIMULATED for m in c.metrics)


def _why(c: Comparison) -> str:
    bad = [m for m in c.metrics if m.verdict == c.verdict]
    if c.verdict == INVALID:
        return c.invalid[0] if c.invalid else "a run was invalid"
    if c.verdict == Verdict.INCONCLUSIVE:
        names = ", ".join(m.name for m in bad)
        return f"{names} undecided after {c.rounds} rounds (not a pass: add rounds)"
    if bad and c.verdict != Verdict.PASS:
        return ", ".join(f"{m.name} {(m.ratio - 1) * 100:+.1f}%" for m in bad if m.ratio)
    return exit_meaning(c.exit_code, simulated(c), c.verdict)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def gate_warnings(c: Comparison) -> list[str]:
    """What the reader must know beside the verdict: metrics left undecided (add rounds), not
    judged, and a null arm whose noise crossed the tolerance; then what the run itself noted."""
    out = [
        f"{m.name} INCONCLUSIVE after {c.rounds} round(s): ratio {_num(m.ratio)}, 95% CI "
        f"[{_num(m.ci_low)}, {_num(m.ci_high)}], MDE {_num(m.mde)}: add rounds" + rounds_planned(m)
        for m in c.metrics
        if m.verdict == Verdict.INCONCLUSIVE
    ]
    out += [
        f"{m.name} not judged: {m.note}"
        for m in c.metrics
        if m.verdict == Verdict.NA and m.method != Method.MINMAX
    ]
    out += [
        f"null arm (base vs base) shows {n.verdict} on {n.name} (ratio {_num(n.ratio)}): "
        "this machine's noise exceeds the tolerance, so treat head's verdicts with care"
        for n in c.noise
        if n.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    ]
    return out + list(c.warnings)


def rounds_planned(m: MetricResult) -> str:
    """How many rounds an unchanged head needs to PASS this metric's tolerance 4 times in 5 at
    the per-round spread its rounds showed: ` (about 14 at this noise: 4.1% a round)`."""
    if (needed := m.rounds_to_pass) is None or m.spread is None:
        return ""
    noise = f"{m.spread * 100:.1f}% a round"
    if needed > MOST_ROUNDS:
        return f" (more than {MOST_ROUNDS} at this noise: {noise})"
    return f" (about {needed} at this noise: {noise})"


def look_line(c: Comparison, next_look: int, round_seconds: list[float], auto: bool = False) -> str:
    """What a look that left the gate undecided says while the job runs: each undecided
    metric's rounds needed at its noise, and the minutes they would take at the rounds' median
    length; a count past the last look is said to be so."""
    last = c.schedule.looks[-1] if c.schedule and c.schedule.looks else 0
    per_round = median(round_seconds) if round_seconds else 0.0
    parts = []
    for m in c.metrics:
        needed, spread = m.rounds_to_pass, m.spread
        if m.verdict != Verdict.INCONCLUSIVE or needed is None or spread is None:
            continue
        if needed > MOST_ROUNDS:
            parts.append(f"{m.name} more than {MOST_ROUNDS} rounds at {spread * 100:.1f}% a round")
            continue
        more = max(needed - c.rounds, 0) * per_round / 60
        beyond = ""
        if needed > last:
            advice = "raise --max-rounds" + ("" if auto else " or give it auto")
            beyond = f", past the last look ({last}): {advice}"
        parts.append(
            f"{m.name} about {needed} rounds at {spread * 100:.1f}% a round "
            f"(~{more:.0f} min more{beyond})"
        )
    needs = "; ".join(parts) or "an improvement to confirm"
    return f"look at {c.rounds} rounds: undecided, {needs}; next look at {next_look}"


def _change(ratio: float) -> str:
    pct = (ratio - 1) * 100
    return f"{pct:+.0f}%" if abs(pct) >= 10 else f"{pct:+.1f}%"


def trade_off(c: Comparison) -> str | None:
    """For a REGRESSION that bought an IMPROVEMENT, what paid for what: `tpot_ms +285% paid
    for ttft_p50_ms 0.52x` (every metric of each kind, in the gate's order). None for any other
    comparison: the verdict stays REGRESSION, these words only say it was a trade."""
    if c.verdict != Verdict.REGRESSION:
        return None
    paid = [m for m in c.metrics if m.verdict == Verdict.REGRESSION and m.ratio is not None]
    bought = [m for m in c.metrics if m.verdict == Verdict.IMPROVEMENT and m.ratio is not None]
    if not paid or not bought:
        return None
    worse = ", ".join(f"{m.name} {_change(m.ratio)}" for m in paid if m.ratio is not None)
    better = ", ".join(f"{m.name} {m.ratio:.2f}x" for m in bought)
    return f"{worse} paid for {better}"


def clear_change(m: MetricResult) -> str | None:
    """For a PASS the gate calls changed: the change and its 95% CI in words, `+7.6% [7.1,
    8.0], within 10%`. None for any other metric."""
    if not m.changed or m.ratio is None or m.ci_low is None or m.ci_high is None:
        return None
    pct = [(x - 1) * 100 for x in (m.ratio, m.ci_low, m.ci_high)]
    return f"{pct[0]:+.1f}% [{pct[1]:.1f}, {pct[2]:.1f}], within {m.tolerance * 100:g}%"


def clear_pass(m: MetricResult) -> str | None:
    """The verdict line of such a PASS: `PASS: ttft_p50_ms +7.6% [7.1, 8.0], within 10%`."""
    change = clear_change(m)
    return None if change is None else f"PASS: {m.name} {change}"
