"""Turns between arms measured at once: each arm's load driver holds the baton for one burst
(or one whole phase of another kind) at a time, in ABBA order, so that a slow spell of the
machine falls on both arms of a round instead of on one run (docs/measurement.md, "One arm,
cold"). Each arm runs in its own thread with its own event loop; the baton is shared."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


def holder(slot: int, names: list[str]) -> str:
    """Who holds turn `slot`: the names in order, then reversed, then in order, ... (ABBA)."""
    cycle, pos = divmod(slot, len(names))
    return names[pos] if cycle % 2 == 0 else names[-1 - pos]


class Baton:
    def __init__(self, names: list[str]) -> None:
        self.names = list(names)
        self.taken: list[str] = []  # each turn's holder, in the order they ran
        self._slot = 0
        self._done: set[str] = set()
        self._cond = threading.Condition()

    def _next(self) -> str | None:
        """The next holder, skipping arms that finished (a crashed arm gives its turns up)."""
        if self._done >= set(self.names):
            return None
        while (name := holder(self._slot, self.names)) in self._done:
            self._slot += 1
        return name

    def take(self, name: str) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._next() == name)
            self.taken.append(name)

    def release(self, name: str) -> None:
        with self._cond:  # `name` held the current slot (take waited for it)
            self._slot += 1
            self._cond.notify_all()

    def finish(self, name: str) -> None:
        """`name` takes no more turns (its run ended, however): the others stop waiting for it."""
        with self._cond:
            self._done.add(name)
            self._cond.notify_all()

    def wait_all(self) -> None:
        """Until every arm has taken its last turn: what an arm does after its own (stopping
        its server, writing its record) would otherwise fall in another arm's measured burst."""
        with self._cond:
            self._cond.wait_for(lambda: self._done >= set(self.names))


@asynccontextmanager
async def turn(baton: Baton | None, name: str) -> AsyncIterator[float]:
    """Hold the baton for the body, which gets the seconds waited for it (0 without a baton);
    the wait runs off the event loop."""
    if baton is None:
        yield 0.0
        return
    begun = time.monotonic()
    await asyncio.to_thread(baton.take, name)
    try:
        yield time.monotonic() - begun
    finally:
        baton.release(name)
