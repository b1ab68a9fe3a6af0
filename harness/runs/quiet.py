"""What else the machine was doing during a round: the cores other processes kept busy, the
share the hypervisor stole, the load average at its start; and, on request, a wait before the
round until other processes leave the machine quiet (docs/measurement.md, "A quiet machine")."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

QUIET_CORES = 0.25  # other processes busier than this (in cores) make a machine not quiet
SAMPLE_S = 1.0  # one look at the machine while the harness itself idles


@dataclass(frozen=True, slots=True)
class CpuClock:
    """The machine's CPU seconds (busy, stolen, all) and this process tree's, at one moment."""

    at: float
    busy: float
    steal: float
    total: float
    own: float

    @classmethod
    def now(cls) -> CpuClock:
        cpu, own = psutil.cpu_times(), psutil.Process().cpu_times()
        idle = cpu.idle + getattr(cpu, "iowait", 0.0)
        steal = getattr(cpu, "steal", 0.0)
        total = sum(cpu) - getattr(cpu, "guest", 0.0) - getattr(cpu, "guest_nice", 0.0)
        mine = own.user + own.system + own.children_user + own.children_system
        return cls(time.monotonic(), total - idle - steal, steal, total, mine)


def others_cores(start: CpuClock, end: CpuClock) -> float:
    """Cores other processes kept busy between two clocks: the machine's busy CPU seconds less
    this process's and its finished children's, over the wall time. A child still running at
    `end` counts as another's, so take `end` after the round's servers stopped."""
    wall = end.at - start.at
    if wall <= 0:
        return 0.0
    return max(0.0, (end.busy - start.busy) - (end.own - start.own)) / wall


def steal_share(start: CpuClock, end: CpuClock) -> float:
    """The share of all CPU time the hypervisor gave to other machines."""
    total = end.total - start.total
    return (end.steal - start.steal) / total if total > 0 else 0.0


def load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def round_machine(start: CpuClock, end: CpuClock, load: float | None, waited_s: float) -> dict:
    """The record a round keeps (`rounds[].machine`)."""
    return {
        "load1": load,
        "others_cores": round(others_cores(start, end), 3),
        "steal_share": round(steal_share(start, end), 4),
        "waited_s": round(waited_s, 1),
    }


def wait_for_quiet(
    max_wait_s: float, say: Callable[[str], None] = lambda _: None, sample_s: float = SAMPLE_S
) -> float:
    """Sample the machine while the harness idles until other processes use less than
    QUIET_CORES, for at most `max_wait_s`: the seconds waited (the round then runs anyway,
    its record saying how busy the machine was)."""
    begun = time.monotonic()
    while True:
        start = CpuClock.now()
        time.sleep(sample_s)
        busy = others_cores(start, CpuClock.now())
        waited = time.monotonic() - begun
        if busy < QUIET_CORES or waited >= max_wait_s:
            return waited
        say(f"waiting for a quiet machine: other processes use {busy:.2f} cores")
