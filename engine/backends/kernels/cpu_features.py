"""What the host CPU computes natively, read from its own feature flags (never assumed)."""

import functools
from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags for native bf16 dot products


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The flags line of /proc/cpuinfo (Linux); empty where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_has_native_bf16() -> bool:
    return any(f in cpu_flags() for f in BF16_FLAGS)
