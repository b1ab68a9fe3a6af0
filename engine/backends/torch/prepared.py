"""PreparedWeights: a model's packed int4 matrices saved once, memory-mapped on later loads.

Packing a GGUF's Q4_1 and Q8_0 matrices for our kernels reads the whole file and takes ~0.5 s
of every cold start, with the file's pages and the packing's temporaries resident at once. The
packed tensors are saved beside nothing else in a cache file named by the GGUF's identity (path,
size, modification time), the packing code's own hash and the kernels' flavour; a later load
maps that file (as llama.cpp maps its GGUF): no packing, and only pages that are read resident.

The folder: $SERVEGATE_WEIGHTS_CACHE, else $XDG_CACHE_HOME/servegate/weights, else
~/.cache/servegate/weights; SERVEGATE_WEIGHTS_CACHE=0 turns it off. A folder that cannot be
written only costs the packing. A file is touched when it is mapped, and a save removes the
folder's files untouched for STALE_DAYS (each GGUF path and engine version makes its own).
"""

import contextlib
import hashlib
import logging
import os
import time
from pathlib import Path

import torch

from engine.backends.torch import int4

log = logging.getLogger("engine")
STALE_DAYS = 14


def cache_dir() -> Path | None:
    setting = os.environ.get("SERVEGATE_WEIGHTS_CACHE", "")
    if setting == "0":
        return None
    if setting:
        return Path(setting)
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "servegate" / "weights"


def cache_key(source: Path, flavour: str) -> str:
    st = source.stat()
    h = hashlib.sha256(Path(int4.__file__).read_bytes())  # the packing's own code
    h.update(f"{source.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{flavour}".encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:20]


class PreparedWeights:
    def __init__(self, source: str | None, flavour: str):
        folder = cache_dir()
        self.path = None
        if folder is not None and source and Path(source).is_file():
            self.path = folder / f"{Path(source).stem}-{cache_key(Path(source), flavour)}.pt"
        self.tensors: dict[str, torch.Tensor] = {}
        self.added = False
        if self.path is not None and self.path.exists():
            try:
                self.tensors = torch.load(self.path, mmap=True, weights_only=True)
                with contextlib.suppress(OSError):
                    os.utime(self.path)  # in use: kept by the pruning below
            except Exception as e:  # a torn or foreign file: pack again and replace it
                log.warning("engine: prepared weights %s unreadable (%s); packing", self.path, e)

    @property
    def hit(self) -> bool:
        return bool(self.tensors) and not self.added

    def get(self, name: str, n: int) -> tuple[torch.Tensor, ...] | None:
        parts = tuple(self.tensors.get(f"{name}/{i}") for i in range(n))
        return None if any(p is None for p in parts) else parts

    def put(self, name: str, parts: tuple[torch.Tensor, ...]) -> None:
        self.tensors.update({f"{name}/{i}": p for i, p in enumerate(parts)})
        self.added = True

    def save(self) -> bool:
        """Write what was packed (written whole, then renamed in); False where nothing was."""
        if self.path is None or not self.added:
            return False
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(self.tensors, tmp)
            os.replace(tmp, self.path)
            self._prune()
            return True
        except OSError as e:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            log.warning("engine: could not save prepared weights to %s (%s)", self.path, e)
            return False

    def _prune(self) -> None:
        cutoff = time.time() - STALE_DAYS * 86400
        for old in self.path.parent.glob("*.pt"):
            with contextlib.suppress(OSError):
                if old != self.path and old.stat().st_mtime < cutoff:
                    old.unlink()
