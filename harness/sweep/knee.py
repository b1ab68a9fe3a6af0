"""Reading a load curve: the knee (where throughput stops growing while latency keeps rising)
and goodput (the highest level meeting every SLO). Pure rules on per-level medians
(docs/sweep.md has the definitions)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.results.metrics import metric
from harness.results.sweep_result import CurvePoint

KNEE_GAIN = 0.10  # less than 10% more tok/s per doubling of the level counts as "flat"


class SloError(ValueError):
    """An --slo that cannot be parsed; the message is one line."""


@dataclass(frozen=True, slots=True)
class Point:
    """One level of one arm's curve: medians over rounds."""

    level: float
    tok_s: float | None
    ttft_p95_ms: float | None


@dataclass(frozen=True, slots=True)
class Slo:
    metric: str
    limit: float

    @property
    def upper(self) -> bool:
        """True when the metric must stay at or below the limit (latency), else at or above."""
        return metric(self.metric).lower_is_better

    def met(self, value: float | None) -> bool:
        if value is None:
            return False
        return value <= self.limit if self.upper else value >= self.limit

    def __str__(self) -> str:
        return f"{self.metric} {'<=' if self.upper else '>='} {self.limit:g}"


def gain_per_doubling(lo: Point, hi: Point) -> float | None:
    """Relative throughput gain from `lo` to `hi`, scaled to one doubling of the level."""
    if not lo.tok_s or hi.tok_s is None or hi.level <= lo.level:
        return None
    if hi.tok_s <= 0:
        return -1.0
    return (hi.tok_s / lo.tok_s) ** (1 / math.log2(hi.level / lo.level)) - 1


def knee(points: list[Point], min_gain: float = KNEE_GAIN) -> float | None:
    """The lowest level after which every step up gains < `min_gain` tok/s per doubling while
    TTFT p95 rises at every step; None when throughput still grows at the top (or < 2 levels)."""
    pts = sorted(points, key=lambda p: p.level)
    for i in range(len(pts) - 1):
        steps = list(zip(pts[i:], pts[i + 1 :], strict=False))
        flat = all((g := gain_per_doubling(a, b)) is not None and g < min_gain for a, b in steps)
        rising = all(
            a.ttft_p95_ms is not None
            and b.ttft_p95_ms is not None
            and b.ttft_p95_ms > a.ttft_p95_ms
            for a, b in steps
        )
        if flat and rising:
            return pts[i].level
    return None


def parse_slos(items: tuple[str, ...] | list[str], known: set[str]) -> list[Slo]:
    """`ttft_p95_ms=2000` (repeatable, or comma-separated) -> SLOs on the summary metrics."""
    out = []
    for item in (part.strip() for text in items for part in text.split(",")):
        if not item:
            continue
        metric, eq, value = item.partition("=")
        metric = metric.strip()
        if not eq or metric not in known:
            names = ", ".join(sorted(known))
            raise SloError(f"--slo wants METRIC=LIMIT with METRIC one of {names}; got {item!r}")
        try:
            limit = float(value)
        except ValueError:
            raise SloError(f"--slo {metric}: the limit must be a number, got {value!r}") from None
        if not math.isfinite(limit) or limit <= 0:
            raise SloError(f"--slo {metric}: the limit must be finite and > 0, got {value!r}")
        out.append(Slo(metric, limit))
    return out


def slo_table(levels: list[float], points: list[CurvePoint], slos: list[Slo]) -> list[bool]:
    """Per level: whether its medians meet every SLO."""
    return [all(s.met(p.median(s.metric)) for s in slos) for p in points[: len(levels)]]


def goodput(levels: list[float], points: list[CurvePoint], slos: list[Slo]) -> float | None:
    """The highest level such that it and every level below it meet every SLO; None when even
    the lowest level misses one (or no SLO was given). A pass above a failing level is noise,
    not capacity, so it does not count."""
    if not slos:
        return None
    best = None
    for level, ok in sorted(zip(levels, slo_table(levels, points, slos), strict=True)):
        if not ok:
            break
        best = level
    return best
