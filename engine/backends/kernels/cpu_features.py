"""What the host CPU computes natively, read from its own feature flags (never assumed).

SERVEGATE_CPU_ISA=avx2 hides the AVX-512 and AMX flags, and the kernels are then built
without them: what an AVX2-only CPU (an older AMD EPYC) runs, on a newer one. Set torch's own
ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2 beside it (before torch is imported)
for torch's operators to match; scripts/stress-tests.sh --cpu avx2 sets all three."""

import functools
import os
from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags for native bf16 dot products
ISAS = {"native": (), "avx2": ("avx512", "amx")}  # SERVEGATE_CPU_ISA -> flag prefixes hidden
BUILD_FLAGS = {"native": [], "avx2": ["-mno-avx512f", "-mno-amx-tile"]}  # for -march=native


def cpu_isa() -> str:
    """SERVEGATE_CPU_ISA: `native` (the default) or `avx2`; anything else is refused."""
    isa = os.environ.get("SERVEGATE_CPU_ISA", "native") or "native"
    if isa not in ISAS:
        raise ValueError(f"SERVEGATE_CPU_ISA must be one of {', '.join(ISAS)}, got {isa!r}")
    return isa


@functools.cache
def _proc_cpuinfo_flags() -> frozenset[str]:
    """The flags line of /proc/cpuinfo (Linux); empty where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_flags() -> frozenset[str]:
    """The CPU's flags, less those SERVEGATE_CPU_ISA hides."""
    hidden = ISAS[cpu_isa()]
    return frozenset(f for f in _proc_cpuinfo_flags() if not (hidden and f.startswith(hidden)))


def kernel_build_flags() -> list[str]:
    """Compiler flags after -march=native that keep the kernels to SERVEGATE_CPU_ISA."""
    return BUILD_FLAGS[cpu_isa()]


def cpu_has_native_bf16() -> bool:
    return any(f in cpu_flags() for f in BF16_FLAGS)


def onednn_isa_cap(flags: frozenset[str]) -> str | None:
    """The `ONEDNN_MAX_CPU_ISA` that makes greedy answers batch-invariant on this CPU (None:
    they already are). With AMX, oneDNN picks AMX or AVX-512 kernels for torch's bf16 matmuls
    by row count, and they round differently: an answer then depends on the requests batched
    beside it and on prompt-cache hits. Capped at AVX-512 with bf16 it does not, but a prefill
    is ~3.4x slower, so the engine leaves the choice to the user (docs/engine.md)."""
    return "AVX512_CORE_BF16" if "amx_bf16" in flags else None
