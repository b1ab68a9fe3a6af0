"""A capacity search: the highest load a server sustains within a suite's `[slo]`. Levels are
tried one at a time on one server: doubling from `start` while they meet the SLO (halving
while they miss), then the geometric middle of the highest level met and the lowest missed
above it, until the two are within `precision`; at most `steps` levels. Pure: the rule is a
function of the levels tried (docs/suites.md, "Capacity")."""

from __future__ import annotations

import math
from dataclasses import dataclass

MODES = ("concurrency", "rate")  # how a level is given: clients, or requests/s

ATTAINMENT = 0.95  # a level meets the SLO when this share of its requests met every limit
MAX_STEPS = 10
MOST = {"rate": 10_000.0, "concurrency": 4096.0}  # beyond any one server a run can drive
BUDGET_S = 300.0  # a search's own time, in every run of every arm: it stops there


class CapacityError(ValueError):
    """A [capacity] table that cannot be searched; the message is one line."""


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    mode: str = "rate"  # rate: open loop, requests/s; concurrency: closed loop, clients
    start: float = 1.0  # the first level tried
    most: float = 256.0  # never beyond
    precision: float = 0.10  # done when the lowest level missed is within this of the met one
    attainment: float = ATTAINMENT
    steps: int = MAX_STEPS
    budget_s: float = BUDGET_S  # the search stops after this many seconds, its bracket as found

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise CapacityError(f"capacity.mode must be one of {', '.join(MODES)}")
        if not self.most <= MOST[self.mode]:
            unit = "req/s" if self.mode == "rate" else "clients"
            raise CapacityError(f"capacity.max must be at most {MOST[self.mode]:g} {unit}")
        if not 10 <= self.budget_s <= 3600 or not 2 <= self.steps <= 50:
            raise CapacityError("capacity needs 10 <= budget_s <= 3600 and 2 <= steps <= 50")
        whole = self.mode == "rate" or float(self.start).is_integer()
        if not (0 < self.start <= self.most and math.isfinite(self.most) and whole):
            raise CapacityError("capacity needs 0 < start <= max (whole clients in concurrency)")
        if not 0 < self.precision < 1 or not 0 < self.attainment <= 1 or self.steps < 2:
            raise CapacityError("capacity needs 0 < precision < 1, 0 < attainment <= 1, steps >= 2")


@dataclass(frozen=True, slots=True)
class Tried:
    level: float
    attained: float  # the share of the level's requests that met every limit
    req_s: float | None  # the ok requests per second it served

    def met(self, plan: CapacityPlan) -> bool:
        return self.attained >= plan.attainment


def attained(stats: dict) -> float:
    """From a phase's stats: the share of its sent requests that succeeded within every limit
    (goodput over the same span as req/s; a failed request missed, one the client cancelled
    on purpose is neither)."""
    ok, good, req_s = stats["ok"], stats["goodput_req_s"], stats["req_s"]
    sent = stats["requests"] - stats.get("cancelled", 0)
    if not sent or not ok or not req_s or good is None:
        return 0.0
    return good / req_s * ok / sent


def bracket(plan: CapacityPlan, tried: list[Tried]) -> tuple[Tried | None, Tried | None]:
    """(the highest level met, the lowest level missed above it): the capacity lies between."""
    met = [t for t in tried if t.met(plan)]
    low = max(met, key=lambda t: t.level, default=None)
    above = [t for t in tried if not t.met(plan) and (low is None or t.level > low.level)]
    return low, min(above, key=lambda t: t.level, default=None)


def next_level(plan: CapacityPlan, tried: list[Tried]) -> float | None:
    """The level to try next, or None when the search is done."""
    if not tried:
        return plan.start
    if len(tried) >= plan.steps:
        return None
    low, high = bracket(plan, tried)
    whole = plan.mode == "concurrency"
    if high is None:  # everything met so far: double, up to the most
        if low is None:  # nothing tried: not reached once `tried` holds a level
            return plan.start
        nxt = min(low.level * 2, plan.most)
        return None if nxt <= low.level else nxt
    if low is None:  # everything missed: halve, down to one client or start/64 req/s
        nxt = math.floor(high.level / 2) if whole else high.level / 2
        return nxt if nxt >= (1 if whole else plan.start / 64) else None
    if high.level <= low.level * (1 + plan.precision) or (whole and high.level - low.level <= 1):
        return None
    mid = math.sqrt(low.level * high.level)
    return float(min(max(round(mid), low.level + 1), high.level - 1)) if whole else mid


def capacity_summary(plan: CapacityPlan, tried: list[Tried]) -> dict:
    """What a run keeps of its search: every level tried (in order), the bracket, and
    `capacity_req_s` at the highest level that met the SLO: in rate mode the rate it offered
    (a level offers exactly its rate, load/arrivals.py), in closed loop the requests/s served."""
    low, high = bracket(plan, tried)
    capacity = (low.level if plan.mode == "rate" else low.req_s) if low else None
    return {
        "mode": plan.mode,
        "attainment": plan.attainment,
        "levels": [
            {
                "level": t.level,
                "attained": round(t.attained, 4),
                "req_s": t.req_s,
                "met": t.met(plan),
            }
            for t in tried
        ],  # fmt: skip
        "met_level": low.level if low else None,
        "missed_level": high.level if high else None,
        "capacity_req_s": capacity,
    }
