"""The power table of docs/statistics.md from saved `harness ab` results: per gated metric the
noise per round (sd of ln head/base), the per-arm CV it implies, the smallest regression the
default schedule catches 4 times in 5 at that noise, and the minutes per round and to the verdict.

    .venv/bin/python scripts/power-table.py results/*/*short-concurrency*.json
    .venv/bin/python scripts/power-table.py --series results/2026-11-30-power-runs/quiet.tsv
    .venv/bin/python scripts/power-table.py --spread itl_p50_ms,tpot_ms results/*/*.json

With --series, one row per run of a scripts/power-runs.sh TSV: exit code, wall time, verdict,
rounds, seconds per round and each interval-judged metric's noise per round. With --spread, one
row per A/B result: the noise per round of each named metric, gated or not (every run's
summary holds them all), and the 95% MDE that noise gives at 5 rounds.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from statistics import median

from scipy import stats

from harness.results.metrics import log_spread
from harness.stats.compare import interval_metrics
from harness.stats.interval import POWER
from harness.stats.sequential import Schedule

DEFAULT = Schedule.plan(3, 9)


def caught(sd: float, rounds: int, alpha: float, tol: float) -> float:
    """The ratio caught with 80% power at `rounds` (interval.detectable_shift, for a given sd)."""
    se, df = sd / math.sqrt(rounds), rounds - 1
    t_power = stats.t.ppf(POWER, df)
    return math.exp(
        max((stats.t.ppf(1 - alpha, df) + t_power) * se, math.log1p(tol) + t_power * se)
    )


def round_seconds(rnd: dict) -> float:
    if isinstance(rnd.get("wall_s"), int | float):
        return rnd["wall_s"]
    return sum(rnd[a]["duration_s"] for a in ("base", "head", "null") if rnd.get(a))


def table(path: Path) -> str:
    ab = json.loads(path.read_text())
    comp, gate = ab["comparison"], ab["gate"]
    walls = [round_seconds(r) for r in ab["rounds"]]
    loads = [
        r[a]["machine"]["load_average"][0]
        for r in ab["rounds"]
        for a in ("base", "head")
        if r.get(a)
    ]
    k = len(interval_metrics(gate))
    lines = [
        f"{path.name}: {comp['verdict']} after {comp['rounds']} rounds, "
        f"{sum(walls) / 60:.1f} min ({median(walls):.0f} s per round), "
        f"1-min load {min(loads):.1f}-{max(loads):.1f}",
        "| metric | noise per round | per-arm CV | 95% MDE at R=5 "
        "| caught 4 in 5 at R=5 | at R=9 |",
        "|---|---|---|---|---|---|",
    ]
    for m in comp["metrics"]:
        if m["method"] == "minmax":
            continue
        sd = log_spread(m["base"], m["head"])
        if sd is None:
            continue
        tol = m["tolerance"] if m["lower_is_better"] else 1 / (1 - m["tolerance"]) - 1
        r5, r9 = (caught(sd, r, DEFAULT.metric_alpha(r, k), tol) for r in (5, 9))
        if not m["lower_is_better"]:  # throughput: the regression is a ratio below 1
            r5, r9 = 1 / r5, 1 / r9
        mde5 = math.exp(stats.t.ppf(0.975, 4) * sd / math.sqrt(5))  # the report's MDE at R=5
        lines.append(
            f"| {m['name']} | {sd * 100:.1f}% | {sd / math.sqrt(2) * 100:.1f}% | {mde5:.3f}x | "
            f"{r5:.3f}x | {r9:.3f}x |"
        )
    return "\n".join(lines)


def series(tsv: Path) -> str:
    rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:] if line.strip()]
    lines = [
        "| run | busy | exit (expected) | wall | verdict, rounds | s per round "
        "| noise per round: TTFT p50 / p95 / tok/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for run, expect, code, wall, verdict, rounds, busy, _load, report in rows:
        ab = json.loads(Path(report.removesuffix(".md") + ".json").read_text())
        noise = [
            log_spread(m["base"], m["head"])
            for m in ab["comparison"]["metrics"]
            if m["method"] != "minmax" and m["name"] in ("ttft_p50_ms", "ttft_p95_ms", "tok_s")
        ]
        per_round = median(round_seconds(r) for r in ab["rounds"])
        lines.append(
            f"| {run} | {'yes' if busy == '1' else 'no'} | {code} ({expect}) | {wall} s "
            f"| {verdict}, {rounds} | {per_round:.0f} | "
            + " / ".join(f"{n * 100:.1f}%" if n is not None else "n/a" for n in noise)
            + " |"
        )
    return "\n".join(lines)


def spread_rows(names: list[str], paths: list[Path]) -> str:
    lines = [
        "| result | rounds | arms | " + " | ".join(f"{n}: noise, MDE at R=5" for n in names) + " |",
        "|---" * (3 + len(names)) + "|",
    ]
    for path in paths:
        ab = json.loads(path.read_text())
        paired = [r for r in ab.get("rounds", []) if r.get("base") and r.get("head")]
        if "comparison" not in ab or len(paired) < 2:
            continue
        same = all(ab["base"].get(k) == ab["head"].get(k) for k in ("commit", "flags", "env"))
        kind = "A/A" if same and ab["base"].get("commit") and not ab["head"].get("dirty") else "A/B"
        cells = []
        for name in names:
            sd = log_spread(
                *([r[a]["summary"].get(name) for r in paired] for a in ("base", "head"))
            )
            mde5 = None if sd is None else math.exp(stats.t.ppf(0.975, 4) * sd / math.sqrt(5))
            cells.append("n/a" if sd is None else f"{sd * 100:.1f}%, {mde5:.3f}x")
        lines.append(f"| {path} | {len(paired)} | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--spread"]:
        print(spread_rows(sys.argv[2].split(","), [Path(a) for a in sys.argv[3:]]))
    elif sys.argv[1:2] == ["--series"]:
        for arg in sys.argv[2:]:
            print(series(Path(arg)) + "\n")
    else:
        for arg in sys.argv[1:]:
            print(table(Path(arg)) + "\n")
