"""What a finished A/B could see: per metric the noise per round, the noise floor (null arm, else
the rounds' own spread), the smallest regression its last look catches 4 times in 5, and the
wall time per round. Read from a saved result, for the report."""

from __future__ import annotations

import math
from statistics import median, stdev


def log_spread(base: list, other: list) -> float | None:
    """sd of ln(other/base) over the rounds where both are positive numbers."""
    d = [
        math.log(o / b)
        for b, o in zip(base, other, strict=False)
        if isinstance(b, int | float) and isinstance(o, int | float) and b > 0 and o > 0
    ]
    return stdev(d) if len(d) >= 2 else None


def _pct(sd: float | None) -> str:
    return "n/a" if sd is None else f"{sd * 100:.1f}%"


def power_rows(comparison: dict) -> list[dict]:
    """One row per interval-judged metric: sd(ln head/base) per round, the noise floor as sd
    per round (null/base when a null arm ran, else head/base), and the 80%-power ratio."""
    noise = {n["name"]: n for n in comparison.get("noise", [])}
    rows = []
    for m in comparison["metrics"]:
        if m["method"] == "minmax" or m["ratio"] is None:
            continue
        spread = log_spread(m["base"], m["head"])
        null = noise.get(m["name"])
        floor = log_spread(null["base"], null["head"]) if null else spread
        caught = m.get("detectable")
        rows.append(
            {
                "name": m["name"],
                "noise": _pct(spread),
                "floor": f"{_pct(floor)} ({'null arm' if null else 'rounds'})",
                "alpha": "n/a" if m.get("alpha") is None else f"{m['alpha']:.2g}",
                "detectable": "n/a" if caught is None else f"{caught:.3f}x",
            }
        )
    return rows


def round_walls(rounds: list[dict]) -> str:
    """'median 71 s (68, 74, 70)' from each round's wall_s; older results lack it."""
    walls = [r["wall_s"] for r in rounds if isinstance(r.get("wall_s"), int | float)]
    if not walls:
        return "not recorded"
    each = ", ".join(f"{w:.0f}" for w in walls)
    return f"median {median(walls):.0f} s per round ({each}; {sum(walls) / 60:.1f} min in all)"
