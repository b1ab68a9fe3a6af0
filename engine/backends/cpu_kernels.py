"""The engine's own CPU kernel (decode_attention.cpp), compiled on first use for this CPU.

torch's cpp_extension builds it with -march=native into its extensions folder
($TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions), once per source, flags and CPU: later
loads take a fraction of a second. `python -m engine.backends.cpu_kernels` builds it ahead
(scripts/install.sh does). Where it cannot be built (no C++ compiler) or SERVEGATE_KERNELS=0,
decode_attention() is None and the backend keeps torch's SDPA.
"""

import functools
import hashlib
import logging
import os
import platform
from pathlib import Path

from engine.backends.cpu_features import cpu_flags

log = logging.getLogger("engine")
SOURCE = Path(__file__).with_name("decode_attention.cpp")
HEAD_DIMS = (16, 32, 64, 128)  # the head sizes decode_attention.cpp is built for
FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-ffast-math"]


def kernels_enabled() -> bool:
    return os.environ.get("SERVEGATE_KERNELS", "1") != "0"


def _build_name() -> str:
    """A name per source, flags and CPU: -march=native code must not load on another CPU."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(" ".join([*FLAGS, platform.machine(), *sorted(cpu_flags())]).encode())
    return f"servegate_decode_attention_{h.hexdigest()[:12]}"


@functools.cache
def decode_attention():
    """The compiled `decode_attention(q, k, v, lengths, scale)`, or None (the reason logged)."""
    if not kernels_enabled() or platform.machine() not in ("x86_64", "AMD64", "aarch64"):
        return None
    try:
        from torch.utils.cpp_extension import load

        log.info("engine: loading the CPU decode attention kernel (built once per CPU, in ~30 s)")
        return load(_build_name(), [str(SOURCE)], extra_cflags=FLAGS).decode_attention
    except Exception as e:  # no compiler, no ninja, no Python headers: SDPA serves instead
        why = str(e).strip().splitlines()[-1:] or [type(e).__name__]
        log.warning("engine: CPU decode attention kernel unavailable (%s); using SDPA", why[0])
        return None


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    raise SystemExit(0 if decode_attention() is not None else 1)
