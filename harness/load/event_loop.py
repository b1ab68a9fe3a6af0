"""The event loop the client reads streams on: uvloop's (libuv), as AIPerf's workers use (a
dependency except on Windows, where asyncio's own runs). A loop's own cost per read is the
client's floor: one Python process reads many more streams on time on libuv
(docs/measurement.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
