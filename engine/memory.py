"""Host memory of this process: current RSS, the kernel's high-water mark, and its reset."""

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
