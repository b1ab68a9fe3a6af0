"""The machine's state a round records, and the wait for a quiet machine before a round."""

import subprocess
import sys

from harness.runs.quiet import CpuClock, others_cores, round_machine, steal_share, wait_for_quiet


def clock(at, busy, steal=0.0, total=100.0, own=0.0):
    return CpuClock(at=at, busy=busy, steal=steal, total=total, own=own)


def test_others_are_the_machines_busy_time_less_this_process_trees():
    start, end = clock(0, 10, own=1), clock(10, 25, own=6)  # 15 s busy, 5 of them ours, in 10 s
    assert others_cores(start, end) == 1.0
    assert others_cores(start, clock(10, 12, own=6)) == 0.0  # never below zero
    assert others_cores(start, clock(0, 30)) == 0.0  # no time passed


def test_steal_is_a_share_of_all_cpu_time():
    assert steal_share(clock(0, 0, steal=1, total=100), clock(1, 0, steal=6, total=200)) == 0.05
    record = round_machine(clock(0, 0), clock(4, 2), 0.5, 3.04)
    assert record == {"load1": 0.5, "others_cores": 0.5, "steal_share": 0.0, "waited_s": 3.0}


def test_a_busy_neighbour_is_waited_for_up_to_the_limit_and_named():
    said = []
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        waited = wait_for_quiet(1.5, said.append, sample_s=0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert waited >= 1.5
    assert said and all(line.startswith("waiting for a quiet machine: other processes use")
                        for line in said)  # fmt: skip


def test_a_live_clock_moves_forward():
    a = CpuClock.now()
    b = CpuClock.now()
    assert b.at >= a.at and b.total >= a.total and b.own >= a.own
