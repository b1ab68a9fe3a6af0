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


def onednn_isa_cap(flags: frozenset[str]) -> str | None:
    """The `ONEDNN_MAX_CPU_ISA` that makes greedy answers batch-invariant on this CPU (None:
    they already are). With AMX, oneDNN picks AMX or AVX-512 kernels for torch's bf16 matmuls
    by row count, and they round differently: an answer then depends on the requests batched
    beside it and on prompt-cache hits. Capped at AVX-512 with bf16 it does not, but a prefill
    is ~3.4x slower, so the engine leaves the choice to the user (docs/engine.md)."""
    return "AVX512_CORE_BF16" if "amx_bf16" in flags else None
