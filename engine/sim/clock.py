"""VirtualClock: time that moves only when the simulation says so."""

import threading

from engine.clock import Clock


class VirtualClock(Clock):
    def __init__(self):
        self.t = 0.0
        self.next_event = float("inf")  # the driver's next arrival: waits end there

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def wait(self, wake: threading.Event, timeout: float, idle: bool) -> None:
        """Jump to the next arrival (idle) or to the end of the wait, whichever is first."""
        wake.clear()
        # at least a microsecond: a wait shorter than the clock's float resolution would
        # leave it where it is, and the scheduler waiting for ever
        end = self.next_event if idle else min(self.t + max(timeout, 1e-6), self.next_event)
        if end != float("inf"):
            self.t = max(self.t, end)
