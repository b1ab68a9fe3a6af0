"""A capacity search against a server whose break rate is known, beside a queue model of it.

The scripted server (tests/helpers/scripted_server.py) serves at most --slots streams at once,
each a fixed service (its first token after --ttft-ms, then max_tokens - 1 more every --itl-ms);
a request that finds every slot busy waits its turn (FIFO). So a queue model of c fixed-time
servers on the very arrivals a level sends says which of its requests meet the SLO, and the
rate at which fewer than the search's attainment do is the server's break rate (on the
search's own seeded draws, and averaged over 50 draws of each rate). The search runs
through `harness run` on a real server process; the model replays each level's seeded arrivals:

    python scripts/capacity_check.py --suite results/2026-12-05-capacity-offered/limit.toml \\
        --out results/2026-12-05-capacity-offered/summary.json
"""

from __future__ import annotations

import argparse
import heapq
import json
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from harness.load.arrivals import arrival_offsets, offered_rate
from harness.workload.levels import level_phase
from harness.workload.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]


def attained(offsets: list[float], slots: int, service_s: float, ttft_s: float,
             limit_s: float) -> float:  # fmt: skip
    """The share of requests whose TTFT (wait for a slot + the server's own TTFT) meets the
    limit, with `slots` FIFO servers of a fixed service time."""
    free = [0.0] * slots  # when each slot is next free
    met = 0
    for t in sorted(offsets):
        start = max(t, heapq.heappop(free))
        heapq.heappush(free, start + service_s)
        met += (start - t) + ttft_s <= limit_s
    return met / len(offsets)


def break_rate(shape, slots: int, service_s: float, ttft_s: float, limit_s: float,
               attainment: float, top: float) -> float:  # fmt: skip
    """The lowest rate, in steps of 0.1 req/s, whose level (its own seeded arrivals, as the
    search draws them) misses: fewer than `attainment` of its requests meet the limit."""
    rate = 1.0
    while rate <= top:
        offsets = arrival_offsets(level_phase(shape, "rate", rate))
        if attained(offsets, slots, service_s, ttft_s, limit_s) < attainment:
            return round(rate, 1)
        rate += 0.1
    return top


def expected_break_rate(shape, slots: int, service_s: float, ttft_s: float, limit_s: float,
                        attainment: float, top: float, seeds: int = 50) -> float:  # fmt: skip
    """The lowest rate, in steps of 0.1 req/s, at which the attainment averaged over `seeds`
    draws of a level's arrivals falls below `attainment`: the break rate of the arrival
    process itself, not of one sample."""
    rate = 1.0
    while rate <= top:
        draws = [arrival_offsets(level_phase(replace(shape, seed=shape.seed + k), "rate", rate))
                 for k in range(seeds)]  # fmt: skip
        mean = sum(attained(d, slots, service_s, ttft_s, limit_s) for d in draws) / seeds
        if mean < attainment:
            return round(rate, 1)
        rate += 0.1
    return top


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--suite", required=True)
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--out", type=Path, required=True)
    o = p.parse_args()
    suite = load_suite(o.suite)
    shape, plan = suite.phases[0], suite.capacity
    server = (
        f"{{python}} {ROOT}/tests/helpers/scripted_server.py --port {{port}} --model "
        f"scripted --ttft-ms {o.ttft_ms:g} --itl-ms {o.itl_ms:g} --max-streams {o.slots}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        run_json = Path(tmp) / "run.json"
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "harness.cli.main", "run", "--suite", o.suite,
               "--serve-cmd", server, "--out", str(run_json)]  # fmt: skip
        done = subprocess.run(cmd, cwd=ROOT)
        took = time.monotonic() - t0
        run = json.loads(run_json.read_text())["runs"][0]
    found = run["capacity"]
    # The model's service: the scripted one, plus what the server's HTTP path adds, read off
    # the run's own lowest level (no request waits there).
    lowest = min(found["levels"], key=lambda lv: lv["level"])
    service_s = (lowest["e2e_p95_ms"]) / 1e3
    ttft_s = lowest["ttft_p95_ms"] / 1e3
    limit_s = suite.slo["ttft_ms"] / 1e3
    model = break_rate(shape, o.slots, service_s, ttft_s, limit_s, plan.attainment, plan.most)
    expected = expected_break_rate(shape, o.slots, service_s, ttft_s, limit_s, plan.attainment,
                                   plan.most)  # fmt: skip
    levels = []
    for lv in found["levels"]:
        offsets = arrival_offsets(level_phase(shape, "rate", lv["level"]))
        levels.append({
            "level": round(lv["level"], 3),
            "offered_req_s": round(offered_rate(offsets), 3),
            "served_req_s": round(lv["req_s"], 3),
            "attained": lv["attained"],
            "model_attained": round(attained(offsets, o.slots, service_s, ttft_s, limit_s), 4),
            "met": lv["met"],
        })  # fmt: skip
    capacity = found["capacity_req_s"]
    summary = {
        "date": run["started_at"],
        "machine": run["machine"],
        "server": {
            "slots": o.slots,
            "ttft_ms": o.ttft_ms,
            "itl_ms": o.itl_ms,
            "max_tokens": shape.max_tokens,
            "service_ms": round(service_s * 1e3, 2),
            "ttft_ms_measured": round(ttft_s * 1e3, 2),
        },  # fmt: skip
        "slo_ttft_ms": suite.slo["ttft_ms"],
        "exit_code": done.returncode,
        "valid": run["valid"],
        "search_s": round(took, 1),
        "levels": levels,
        "met_level": found["met_level"],
        "missed_level": found["missed_level"],
        "capacity_req_s": capacity,
        "model_break_req_s": model,
        "capacity_over_model": round(capacity / model, 4) if capacity else None,
        "model_expected_break_req_s": expected,
        "capacity_over_expected": round(capacity / expected, 4) if capacity else None,
    }
    o.out.parent.mkdir(parents=True, exist_ok=True)
    o.out.write_text(json.dumps(summary, indent=1) + "\n")
    for lv in levels:
        print(f"level {lv['level']:7.2f} req/s: offered {lv['offered_req_s']:7.2f}, served "
              f"{lv['served_req_s']:7.2f}, attained {lv['attained']:.3f} (model "
              f"{lv['model_attained']:.3f}) {'met' if lv['met'] else 'missed'}")  # fmt: skip
    print(f"capacity {capacity} req/s, the model breaks at {model} req/s "
          f"({summary['capacity_over_model']}x; {expected} req/s over 50 draws, "
          f"{summary['capacity_over_expected']}x), search {took:.0f} s, exit {done.returncode}, "
          f"{platform.node()}")  # fmt: skip


if __name__ == "__main__":
    main()
