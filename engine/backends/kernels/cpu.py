"""The engine's own CPU kernels (csrc/: cpu_decode.cpp, cpu_block.cpp, cpu_prefill.cpp, cpu_q4.cpp,
cpu_q4_f32.cpp), compiled on first use for this CPU.

torch's cpp_extension builds them with -march=native into its extensions folder
($TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions), once per source, flags, CPU, torch,
Python and virtual environment: later loads take a fraction of a second, and another
environment with the same torch build loads the first one's build (servegate_cpu_kernels_shared).
`python -m engine.backends.kernels.cpu` builds them ahead (scripts/install.sh does). Where
they cannot be built (no C++ compiler) or SERVEGATE_KERNELS=0, the accessors return None and
the backend keeps torch's own operators.
"""

import functools
import hashlib
import logging
import os
import platform
import sys
import time
from pathlib import Path

from engine.backends.kernels.cpu_features import cpu_flags, kernel_build_flags

log = logging.getLogger("engine")
CSRC = Path(__file__).with_name("csrc")
SOURCES = [
    CSRC / n
    for n in ("cpu_decode.cpp", "cpu_block.cpp", "cpu_prefill.cpp", "cpu_q4.cpp", "cpu_q4_f32.cpp")
]
HEADERS = [CSRC / n for n in ("cpu_common.h", "cpu_kernels.h", "cpu_prefill_tiles.h")]  # copied too
HEAD_DIMS = (16, 32, 64, 128)  # the head sizes the kernels are built for
# -fopenmp: at::parallel_for is a header template that runs serially without it (its OpenMP
# calls bind to torch's own libgomp). Apple's clang has no OpenMP runtime: SIMD only there.
OPENMP = "-fopenmp-simd" if sys.platform == "darwin" else "-fopenmp"
FLAGS = ["-O3", "-march=native", OPENMP, "-ffast-math"]


def build_flags() -> list[str]:
    return FLAGS + kernel_build_flags()  # SERVEGATE_CPU_ISA=avx2: no AVX-512 nor AMX code


def kernels_enabled() -> bool:
    return os.environ.get("SERVEGATE_KERNELS", "1") != "0"


STALE_LOCK_S = 300  # a build takes ~30-60 s: an older lock was left by a killed build


@functools.cache
def _sources() -> bytes:
    """The kernels' sources and headers, read once: both build names hash them."""
    return b"".join(src.read_bytes() for src in SOURCES + HEADERS)


def _digest(env: list[str]) -> str:
    """sha256 of the sources, the flags, the CPU and `env` (what else the build depends on)."""
    h = hashlib.sha256(_sources())
    h.update("\0".join([*build_flags(), platform.machine(), *sorted(cpu_flags()), *env]).encode())
    return h.hexdigest()


def _build_name() -> str:
    """A name per source, flags, CPU, torch, Python and environment: -march=native code must
    not load on another CPU, nor a build against one torch into another; and each virtual
    environment gets its own folder, since build.ninja holds its include paths (two venvs
    sharing one rebuilt each other's kernels and waited on each other's lock)."""
    import torch

    env = [torch.__version__, str(Path(torch.__file__).parent), sys.version, sys.prefix]
    return f"servegate_cpu_kernels_{_digest(env)[:12]}"


def _shared_dir() -> Path:
    """Where a finished build is kept for every environment with the same torch build: the
    sources, flags, CPU, torch version and git revision, and Python name it. A .so made against
    one torch build loads in any environment of that build (torch's libraries are already
    loaded by then), so a fresh virtual environment or an isolated commit's build skips the
    minute of compiling."""
    import torch

    build = [torch.__version__, torch.version.git_version, sys.version]
    return _extensions_root() / "servegate_cpu_kernels_shared" / _digest(build)[:16]


def _extensions_root() -> Path:
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions"
    return Path(root)


def _load_shared():
    for path in sorted(_shared_dir().glob("*.so"))[:1]:  # built under its first venv's name
        return _load_built(path, path.stem)
    return None


def _share(built: Path) -> None:
    """Keep a copy of a finished build for other environments (best effort)."""
    try:
        folder = _shared_dir()
        folder.mkdir(parents=True, exist_ok=True)
        if not any(folder.glob("*.so")):
            tmp = folder / f".{built.name}.{os.getpid()}"
            tmp.write_bytes(built.read_bytes())
            os.replace(tmp, folder / built.name)
    except OSError:
        pass


def _build_dir(name: str) -> Path:
    """The build folder, holding its own copy of the sources: ninja rebuilds when a source's
    path changes, and every git worktree of the harness has its own path. A lock left by a
    killed build is removed (torch's loader would wait on it forever)."""
    folder = _extensions_root() / name
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / "lock"
    if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
        lock.unlink(missing_ok=True)
    for src in SOURCES + HEADERS:
        copy, text = folder / src.name, src.read_bytes()
        if not copy.exists() or copy.read_bytes() != text:  # the name hashes the text: once
            tmp = folder / f".{src.name}.{os.getpid()}"
            tmp.write_bytes(text)
            os.replace(tmp, copy)
    return folder


@functools.cache
def _module():
    if not kernels_enabled():
        return None
    try:
        name = _build_name()
        folder = _build_dir(name)
        built = _load_built(folder / f"{name}.so", name)
        if built is not None:
            _share(folder / f"{name}.so")
            return built
        built = _load_shared()
        if built is not None:
            return built
        from torch.utils.cpp_extension import load

        log.info("engine: loading the CPU kernels (built once per CPU, in ~1 min)")
        sources = [str(folder / src.name) for src in SOURCES]
        module = load(name, sources, extra_cflags=build_flags(), build_directory=str(folder))
        _share(folder / f"{name}.so")
        return module
    except Exception as e:  # no compiler, no ninja, no Python headers: torch's ops serve
        why = str(e).strip().splitlines()[-1:] or [type(e).__name__]
        log.warning("engine: CPU kernels unavailable (%s); using torch's", why[0])
        return None


def _load_built(path: Path, name: str):
    """The module a finished build left, loaded directly: torch's `load` would first run ninja
    and probe the compiler (~0.15 s of every cold start). The folder's name hashes everything
    the build depends on, so a .so in it is this build's; one that does not load (a build
    killed while linking) is rebuilt by `load`."""
    if not path.exists() or (path.parent / "lock").exists():
        return None
    import importlib.machinery
    import importlib.util

    try:
        spec = importlib.util.spec_from_loader(
            name, importlib.machinery.ExtensionFileLoader(name, str(path))
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except ImportError:
        return None


def decode_attention():
    """`decode_attention(q, k, v, lengths, scale)`, or None (the reason logged)."""
    m = _module()
    return m.decode_attention if m is not None else None


def prefill_attention():
    """`prefill_attention(q, k, v, mask, scale)`: SDPA with an additive mask, or None."""
    m = _module()
    return m.prefill_attention if m is not None else None


def rms_norm():
    """`rms_norm(h, weight, eps)` over the rows of a bfloat16 [N, D], rounded as torch rounds
    RMSNorm's ops (torch/llama.py RMSNorm), or None."""
    m = _module()
    return m.rms_norm if m is not None else None


def swiglu():
    """`swiglu(gate_up)`: F.silu(gate) * up of a bfloat16 [N, 2I], rounded as torch rounds the
    two ops, or None."""
    m = _module()
    return m.swiglu if m is not None else None


def q4_matvec():
    """`q4_matvec(x, codes, d, m)`: a few bfloat16 rows times a Q4_1 matrix packed by
    torch.int4.pack_q4, or None (not built: the CPU lacks AVX512-BF16)."""
    m = _module()
    return getattr(m, "q4_matvec", None)


def q4_weight_t():
    """`q4_weight_t(codes, d, m, out)`: W^T [K, N] in bfloat16 into `out` from a matrix packed
    by torch.int4.pack_q4, or None (where q4_matvec is None)."""
    m = _module()
    return getattr(m, "q4_weight_t", None)


def q4_matvec_f32():
    """`q4_matvec_f32(x, codes, d, m)`: a few float32 rows times a Q4_1 matrix packed by
    torch.int4.pack_q4 (float32 out), or None (not built: the CPU lacks AVX2 and FMA)."""
    m = _module()
    return getattr(m, "q4_matvec_f32", None)


def q4_weight_t_f32():
    """`q4_weight_t_f32(codes, d, m, out)`: W^T [K, N] in float32 into `out`, or None."""
    m = _module()
    return getattr(m, "q4_weight_t_f32", None)


def decode_layer():
    """`decode_layer(h, norms, projections, pool, rows, rope, ...)`: one int4 Llama block's
    decode step, or None."""
    m = _module()
    return m.decode_layer if m is not None else None


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    raise SystemExit(0 if _module() is not None else 1)
