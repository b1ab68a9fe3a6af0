"""What the harness's RSS sampler costs the machine: CPU seconds per second of sampling a real
three-process tree, at each rate given (default 100 and 10 Hz), from getrusage of this process.

    .venv/bin/python scripts/sampler-cost.py [HZ ...]
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import psutil

from harness.load.memory_timeline import Sampler

TREE = (
    "import subprocess, sys, time; "
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']) "
    "for _ in range(2)]; time.sleep(300)"
)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(pid: int, hz: float, seconds: float = 10.0) -> str:
    sampler = Sampler(pid, time.perf_counter(), hz)
    sampler.period = 1.0 / hz  # the class keeps >= 50 Hz; this measures below it too
    t0, c0 = time.perf_counter(), cpu_s()
    sampler.start()
    time.sleep(seconds)
    timeline = sampler.stop()
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    n = max(len(timeline.t), 1)
    return (
        f"{hz:6.0f} Hz: {len(timeline.t)} samples in {wall:.1f} s, CPU {cpu:.3f} s = "
        f"{cpu / wall * 100:.2f}% of one core ({cpu / n * 1e6:.0f} us per sample)"
    )


if __name__ == "__main__":
    rates = [float(a) for a in sys.argv[1:]] or [100.0, 10.0]
    tree = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        time.sleep(1.0)
        for hz in rates * 2:
            print(measure(tree.pid, hz), flush=True)
    finally:
        for proc in [*psutil.Process(tree.pid).children(recursive=True), tree]:
            proc.kill()
