"""What the report, the pull-request summary and the terminal say about a comparison, in words:
written here from the numbers the gate stored (stats/ returns numbers and verdicts only)."""

from __future__ import annotations

from statistics import median

from harness.results.metrics import Method
from harness.results.verdicts import MOST_ROUNDS, Verdict


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def gate_warnings(comparison: dict) -> list[str]:
    """What the reader must know beside the verdict: metrics left undecided (add rounds), not
    judged, and a null arm whose noise crossed the tolerance; then what the run itself noted."""
    rounds = comparison["rounds"]
    out = [
        f"{m['name']} INCONCLUSIVE after {rounds} round(s): ratio {_num(m['ratio'])}, 95% CI "
        f"[{_num(m['ci_low'])}, {_num(m['ci_high'])}], MDE {_num(m['mde'])}: add rounds"
        + rounds_planned(m)
        for m in comparison["metrics"]
        if m["verdict"] == Verdict.INCONCLUSIVE
    ]
    out += [
        f"{m['name']} not judged: {m['note']}"
        for m in comparison["metrics"]
        if m["verdict"] == Verdict.NA and m["method"] != Method.MINMAX
    ]
    out += [
        f"null arm (base vs base) shows {n['verdict']} on {n['name']} (ratio {n['ratio']:.3f}): "
        "this machine's noise exceeds the tolerance, so treat head's verdicts with care"
        for n in comparison.get("noise", [])
        if n["verdict"] in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    ]
    return out + list(comparison["warnings"])


def rounds_planned(m: dict) -> str:
    """How many rounds an unchanged head needs to PASS this metric's tolerance 4 times in 5 at
    the per-round spread its rounds showed: ` (about 14 at this noise: 4.1% a round)`."""
    if (needed := m.get("rounds_to_pass")) is None:
        return ""
    noise = f"{m['spread'] * 100:.1f}% a round"
    if needed > MOST_ROUNDS:
        return f" (more than {MOST_ROUNDS} at this noise: {noise})"
    return f" (about {needed} at this noise: {noise})"


def look_line(
    comparison: dict, next_look: int, round_seconds: list[float], auto: bool = False
) -> str:
    """What a look that left the gate undecided says while the job runs: each undecided
    metric's rounds needed at its noise, and the minutes they would take at the rounds' median
    length; a count past the last look is said to be so."""
    rounds, last = comparison["rounds"], (comparison.get("schedule") or {}).get("looks", [0])[-1]
    per_round = median(round_seconds) if round_seconds else 0.0
    parts = []
    for m in comparison["metrics"]:
        if m["verdict"] != Verdict.INCONCLUSIVE or (needed := m.get("rounds_to_pass")) is None:
            continue
        spread = m["spread"]
        if needed > MOST_ROUNDS:
            parts.append(
                f"{m['name']} more than {MOST_ROUNDS} rounds at {spread * 100:.1f}% a round"
            )
            continue
        more = max(needed - rounds, 0) * per_round / 60
        beyond = ""
        if needed > last:
            advice = "raise --max-rounds" + ("" if auto else " or give it auto")
            beyond = f", past the last look ({last}): {advice}"
        parts.append(
            f"{m['name']} about {needed} rounds at {spread * 100:.1f}% a round "
            f"(~{more:.0f} min more{beyond})"
        )
    needs = "; ".join(parts) or "an improvement to confirm"
    return f"look at {rounds} rounds: undecided, {needs}; next look at {next_look}"


def _change(ratio: float) -> str:
    pct = (ratio - 1) * 100
    return f"{pct:+.0f}%" if abs(pct) >= 10 else f"{pct:+.1f}%"


def trade_off(comparison: dict) -> str | None:
    """For a REGRESSION that bought an IMPROVEMENT, what paid for what: `tpot_ms +285% paid
    for ttft_p50_ms 0.52x` (every metric of each kind, in the gate's order). None for any other
    comparison: the verdict stays REGRESSION, these words only say it was a trade."""
    if comparison["verdict"] != Verdict.REGRESSION:
        return None
    paid = [m for m in comparison["metrics"] if m["verdict"] == Verdict.REGRESSION]
    bought = [m for m in comparison["metrics"] if m["verdict"] == Verdict.IMPROVEMENT]
    if not paid or not bought:
        return None
    worse = ", ".join(f"{m['name']} {_change(m['ratio'])}" for m in paid)
    better = ", ".join(f"{m['name']} {m['ratio']:.2f}x" for m in bought)
    return f"{worse} paid for {better}"


def verdict_words(comparison: dict) -> str:
    """The overall verdict as a first line says it: `REGRESSION (trade-off)` when the
    regression bought an improvement, else the verdict itself."""
    trade = trade_off(comparison) is not None
    return f"{comparison['verdict']} (trade-off)" if trade else str(comparison["verdict"])


def clear_change(m: dict) -> str | None:
    """For a PASS the gate calls changed: the change and its 95% CI in words, `+7.6% [7.1,
    8.0], within 10%`. None for any other metric."""
    if not m.get("changed"):
        return None
    pct = [(m[k] - 1) * 100 for k in ("ratio", "ci_low", "ci_high")]
    return f"{pct[0]:+.1f}% [{pct[1]:.1f}, {pct[2]:.1f}], within {m['tolerance'] * 100:g}%"


def clear_pass(m: dict) -> str | None:
    """The verdict line of such a PASS: `PASS: ttft_p50_ms +7.6% [7.1, 8.0], within 10%`."""
    change = clear_change(m)
    return None if change is None else f"PASS: {m['name']} {change}"
