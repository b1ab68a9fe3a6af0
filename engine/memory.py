"""Host memory of this process: current RSS, the kernel's high-water mark, and its reset."""

import contextlib
import ctypes
import resource
import sys
from pathlib import Path

import psutil

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def rss_bytes() -> int:
    return psutil.Process().memory_info().rss


def peak_rss_bytes() -> int:
    """VmHWM on Linux (resettable); ru_maxrss elsewhere (bytes on macOS, KiB on Linux)."""
    if STATUS.exists():
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def reset_peak_rss() -> bool:
    """Writing 5 to clear_refs resets VmHWM to the current RSS (Linux only)."""
    try:
        CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the OS: glibc keeps what a load's large temporaries
    freed (200 MB of SmolLM2's RSS after loading). A no-op where there is no malloc_trim."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_THRESHOLD_MAX = 32 << 20  # glibc refuses more on 64-bit


def keep_freed_memory() -> bool:
    """From here on, serve large blocks from the heap and keep what is freed: a forward's
    temporaries (megabytes each) are then the same pages every step, not new ones the kernel
    must fault in and zero (a tenth of prefill's CPU time was that, in the kernel, and much of
    its spread from run to run). The steady working set stays resident. glibc only."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(
            libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
            and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
        )
    except (OSError, AttributeError):
        return False
