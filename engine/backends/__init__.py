"""Compute backends, one room each: torch/, mlx/ and kernels/ (C++ CPU kernels, sources in
kernels/csrc/). Only those rooms import torch or mlx; this module picks one lazily."""

import platform

from engine.backends.base import Backend, DeviceMemory
from engine.model.load import LoadedModel

BACKENDS = ("auto", "torch", "mlx")


def resolve_backend_name(name: str) -> str:
    """auto: MLX on Apple silicon, else torch (CUDA where present, else CPU)."""
    if name == "auto":
        apple = platform.system() == "Darwin" and platform.machine() == "arm64"
        return "mlx" if apple else "torch"
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: use one of {', '.join(BACKENDS)}")
    return name


def load_backend(
    name: str, loaded: LoadedModel, device: str = "auto", dtype: str = "auto"
) -> Backend:
    name = resolve_backend_name(name)
    if name == "mlx":
        from engine.backends.mlx.backend import MLXBackend

        return MLXBackend(loaded, device=device, dtype=dtype)
    from engine.backends.torch.backend import TorchBackend

    return TorchBackend(loaded, device=device, dtype=dtype)


__all__ = ["Backend", "DeviceMemory", "load_backend", "resolve_backend_name", "BACKENDS"]
