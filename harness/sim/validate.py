"""The check against reality: a suite (or a sweep's levels) run for real and simulated; per
metric the simulated value's error against the median of the real runs, beside the real runs'
own spread (how far one real run is from another), and whether the simulated scheduler made the
real one's decisions (its prefill, spill, cache and decode counters, equal or not).

Pure: run records in, rows and Markdown out; harness/cli/sim.py runs the servers."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import median

from harness.results.run import Run

COMPARED = ("ttft_p50_ms", "ttft_p95_ms", "tok_s")
GOAL = 0.10  # BLIS / inference-sim's target: within 10% of the real run
SCHEDULING = (
    "engine_prefill_forwards_total",
    "engine_prefill_rows_total",
    "engine_prefill_rows_spilled_total",
    "engine_prefill_admission_capped_total",
    "engine_prompt_cache_hits_total",
    "engine_prompt_cache_misses_total",
    "engine_prompt_cache_tokens_reused_total",
    "engine_decode_steps_total",
    "engine_decode_rows_total",
)


@dataclass(frozen=True)
class Row:
    case: str  # a suite, or "sweep c4"
    metric: str
    real: float | None  # the median of the real runs
    low: float | None  # the real runs' least and greatest
    high: float | None
    sim: float | None
    error: float | None  # (sim - real) / real

    @property
    def spread(self) -> float | None:
        """(greatest - least) / median of the real runs: how far one real run is from another."""
        if self.low is None or self.high is None or not self.real or self.low == self.high:
            return None
        return (self.high - self.low) / self.real

    @property
    def within(self) -> bool | None:
        return None if self.error is None else abs(self.error) <= GOAL

    @property
    def inside(self) -> bool | None:
        """The simulated value lies between the least and greatest real run (with 2+ runs)."""
        if self.sim is None or self.spread is None or self.low is None or self.high is None:
            return None
        return self.low <= self.sim <= self.high


def rows(case: str, reals: list[dict], sim: dict) -> list[Row]:
    """`reals`, `sim`: summaries (a run's, or a phase's stats) with the COMPARED metrics."""
    out = []
    for metric in COMPARED:
        values = [v for r in reals if (v := r.get(metric)) is not None]
        real = median(values) if values else None
        low, high = (min(values), max(values)) if values else (None, None)
        s = sim.get(metric)
        error = None if not real or s is None else (s - real) / real
        out.append(Row(case, metric, real, low, high, s, error))
    return out


def counter_diffs(real: dict[str, dict], sim: dict[str, dict]) -> list[str]:
    """The scheduling counters that differ, per phase, as 'phase: name real -> sim'."""
    diffs = []
    for phase, counters in real.items():
        mine = sim.get(phase, {})
        for name in sorted(set(counters) | set(mine)):
            if name.split("{")[0] not in SCHEDULING:
                continue
            r, s = counters.get(name, 0.0), mine.get(name, 0.0)
            if r != s:
                diffs.append(f"{phase}: {name} {r:g} -> {s:g}")
    return diffs


def decisions(real_runs: list[Run], sim_run: Run, phases: list[str] | None = None) -> str:
    """'equal' when every real run's scheduling counters are the simulated run's, else the
    first run's differences (`phases`: only these phases, for a sweep's levels)."""

    def pick(run: Run) -> dict:
        counters = run.counters or {}
        return {p: c for p, c in counters.items() if phases is None or p in phases}

    differing = [d for run in real_runs if (d := counter_diffs(pick(run), pick(sim_run)))]
    if not differing:
        return "equal"
    return f"differ in {len(differing)} of {len(real_runs)} real run(s): " + "; ".join(
        differing[0][:4]
    )


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:+.1f}%"


def _yes(v: bool | None) -> str:
    return "n/a" if v is None else ("yes" if v else "no")


def markdown(table: list[Row], verdicts: dict[str, str], repeat: int) -> str:
    many = repeat > 1
    lines = [
        f"| case | metric | real{' (median)' if many else ''} | real range | real spread "
        "| simulated | error | within 10% | inside the real range |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        span = f"{_num(r.low)}-{_num(r.high)}" if r.spread is not None else "n/a"
        spread = "n/a" if r.spread is None else f"{r.spread * 100:.1f}%"
        lines.append(
            f"| {r.case} | {r.metric} | {_num(r.real)} | {span} | {spread} | {_num(r.sim)} "
            f"| {_pct(r.error)} | {_yes(r.within)} | {_yes(r.inside)} |"
        )
    judged = [r.within for r in table if r.within is not None]
    held = sum(judged)
    summary = (
        f"Within 10% of the real {'median' if many else 'run'}: {held} of {len(judged)} cells."
    )
    ranged = [(r.inside, r.spread) for r in table if r.inside is not None and r.spread is not None]
    if ranged:
        spreads = sorted(spread for _, spread in ranged)
        summary += (
            f" Inside the {repeat} real runs' range: {sum(inside for inside, _ in ranged)} of "
            f"{len(ranged)}. The real runs' own spread: median {median(spreads) * 100:.1f}%, "
            f"largest {spreads[-1] * 100:.1f}%."
        )
    lines += ["", summary, "",
              "| case | scheduling counters, simulated vs real |", "|---|---|"]  # fmt: skip
    lines += [f"| {case} | {v} |" for case, v in verdicts.items()]
    return "\n".join(lines) + "\n"


def as_json(table: list[Row], verdicts: dict[str, str]) -> dict:
    rows = [asdict(r) | {"spread": r.spread, "within": r.within, "inside": r.inside}
            for r in table]  # fmt: skip
    return {"rows": rows, "decisions": verdicts}
