"""The report's engagement table: per phase, the counter series the suite expects and those
whose mean delta differs between arms are shown; the rest (unmoved or equal) is folded away."""

from __future__ import annotations

from dataclasses import dataclass

ARM_ORDER = ("base", "head", "null")
DIFFERS = 0.10  # a series whose arm means differ by more than this fraction (and by >= 1)


@dataclass(slots=True)
class Row:
    phase: str
    series: str
    means: list[str]
    why: str  # "expected", "differs" or "" (folded)


def _runs(rounds: list[dict], arm: str) -> list[dict]:
    return [r[arm] for r in rounds if r.get(arm) is not None]


def expected_names(runs: list[dict]) -> dict[str, set[str]]:
    """Per phase, the series names the suite's `expect` rules mention."""
    out: dict[str, set[str]] = {}
    for run in runs:
        for phase, body in (run.get("phases") or {}).items():
            for outcome in body.get("expect") or []:
                out.setdefault(phase, set()).add(_name(outcome["series"]))
    return out


def differs(values: list[float]) -> bool:
    lo, hi = min(values), max(values)
    return hi - lo >= 1 and (lo <= 0 or hi / lo > 1 + DIFFERS)


def engagement(rounds: list[dict]) -> tuple[list[str], list[Row], list[Row]]:
    """(arms, shown rows, folded rows): mean delta per (phase, series) for each arm."""
    sums: dict[tuple[str, str], dict[str, list[float]]] = {}
    arms = [a for a in ARM_ORDER if _runs(rounds, a)]
    for arm in arms:
        for run in _runs(rounds, arm):
            for phase, deltas in (run.get("counters") or {}).items():
                for series, value in deltas.items():
                    sums.setdefault((phase, series), {}).setdefault(arm, []).append(value)
    expected = expected_names([run for a in arms for run in _runs(rounds, a)])
    shown, folded = [], []
    for (phase, series), by_arm in sums.items():
        means = {a: sum(v) / len(v) for a, v in by_arm.items()}
        name = _name(series)
        why = "expected" if name in expected.get(phase, ()) else ""
        if not why and (len(means) < len(arms) or differs(list(means.values()))):
            why = "differs"
        cells = [f"{means[a]:g}" if a in means else "—" for a in arms]
        (shown if why else folded).append(Row(phase, series, cells, why))
    return arms, shown, folded


def _name(series: str) -> str:
    return series.split("{", 1)[0].strip()
