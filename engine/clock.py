"""Clock: where the scheduler reads the time and waits for work.

A server runs on the system clock; a simulation (engine/sim) passes a virtual one that jumps to
the next event, so the same Scheduler and policy code run in both.
"""

import threading
import time


class Clock:
    def now(self) -> float:
        return time.perf_counter()

    def wait(self, wake: threading.Event, timeout: float, idle: bool) -> None:
        """Until `wake` is set or `timeout` passes; `idle`: nothing to do but wait for work."""
        wake.wait(timeout)
        wake.clear()


SYSTEM_CLOCK = Clock()
