"""release_freed_memory hands the heap's free pages back to the OS (the engine calls it once
its load's large temporaries are freed)."""

import platform
import sys

import pytest

from engine.memory import release_freed_memory, rss_bytes


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's",
)
def test_freed_heap_pages_leave_the_rss():
    blocks = [bytearray(64 * 1024) for _ in range(3000)]  # ~190 MB on the heap, touched
    pin = bytearray(64 * 1024)  # above them: glibc's own top trimming cannot return them
    del blocks
    before = rss_bytes()
    release_freed_memory()
    assert before - rss_bytes() > 100 * 2**20
    del pin
