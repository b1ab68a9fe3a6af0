"""No collector pauses while requests are timed. The collector is the process's: arms measured
at once run in threads of one process, so it is frozen when the first of them enters a phase
and comes back only when the last one leaves (one arm's phase ending must not switch it back
on under another's burst)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0


@contextmanager
def frozen_gc() -> Iterator[None]:
    """Collect, freeze the survivors, disable; undone when the last holder leaves. Enter it
    before the phase's clock starts (a full collection takes tens of milliseconds)."""
    global _holders
    with _lock:
        if _holders == 0:
            gc.collect()
            gc.freeze()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.enable()
                gc.unfreeze()
