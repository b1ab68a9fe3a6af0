"""The report's engagement table: per phase, the counter series the suite expects and those
whose mean delta differs between arms are shown; the rest (unmoved, equal, or gauges, whose
deltas mean little) is folded away."""

from __future__ import annotations

from dataclasses import dataclass

from harness.results.run import Run
from harness.workload.expect import ExpectError, parse_series

DIFFERS = 0.10  # a series whose arm means differ by more than this fraction (and by >= 1)
COUNTER_SUFFIXES = ("_total", "_count", "_sum")  # Prometheus naming: anything else is a gauge


@dataclass(slots=True)
class Row:
    phase: str
    series: str
    means: list[str]
    why: str  # "expected", "differs" or "" (folded)


def _parse(series: str) -> tuple[str, frozenset]:
    try:
        name, labels = parse_series(series)
    except ExpectError:  # not in canonical form: match on the name alone
        return series.split("{", 1)[0].strip(), frozenset()
    return name, frozenset(labels)


def expected_series(runs: list[Run]) -> dict[str, list[tuple[str, frozenset]]]:
    """Per phase, the (name, labels) of the series the suite's `expect` rules select."""
    out: dict[str, list[tuple[str, frozenset]]] = {}
    for run in runs:
        for phase, body in (run.phases or {}).items():
            for outcome in body.expect or []:
                out.setdefault(phase, []).append(_parse(outcome.series))
    return out


def selected(series: str, rules: list[tuple[str, frozenset]]) -> bool:
    name, labels = _parse(series)
    return any(name == n and wanted <= labels for n, wanted in rules)


def differs(values: list[float]) -> bool:
    lo, hi = min(values), max(values)
    return hi - lo >= 1 and (lo <= 0 or hi / lo > 1 + DIFFERS)


def _cell(series: str, mean: float) -> str:
    """A mean as a reader takes it in: bytes in MiB, other values to four significant digits."""
    if _parse(series)[0].endswith("_bytes") or "_bytes_" in series:
        return f"{mean / 2**20:.1f} MiB"
    return f"{mean:.4g}"


def engagement(runs_of: dict[str, list[Run]]) -> tuple[list[str], list[Row], list[Row]]:
    """(arms, shown rows, folded rows): mean delta per (phase, series) for each arm (`runs_of`:
    each arm's runs). Only arms that exported counters at all are compared (an arm without
    /metrics differs in nothing)."""
    sums: dict[tuple[str, str], dict[str, list[float]]] = {}
    arms = [a for a, runs in runs_of.items() if runs]
    for arm in arms:
        for run in runs_of[arm]:
            for phase, deltas in (run.counters or {}).items():
                for series, value in deltas.items():
                    sums.setdefault((phase, series), {}).setdefault(arm, []).append(value)
    counting = {a for by_arm in sums.values() for a in by_arm}
    expected = expected_series([run for a in arms for run in runs_of[a]])
    shown: list = []
    folded: list = []
    for (phase, series), by_arm in sums.items():
        means = {a: sum(v) / len(v) for a, v in by_arm.items()}
        why = "expected" if selected(series, expected.get(phase, [])) else ""
        counter = _parse(series)[0].endswith(COUNTER_SUFFIXES)
        if not why and counter and (len(means) < len(counting) or differs([*means.values()])):
            why = "differs"
        cells = [_cell(series, means[a]) if a in means else "—" for a in arms]
        (shown if why else folded).append(Row(phase, series, cells, why))
    return arms, shown, folded
