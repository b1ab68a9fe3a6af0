"""A GGUF file's metadata and tensors, read from one memory map.

The `gguf` package's reader builds a numpy view for every part of every field (a quarter of a
million for SmolLM2's 49,152-token vocabulary and its merges): about 2 s and a few hundred MB at
load. This reads the metadata with `struct` and leaves each tensor as a view of the map, so
its pages are the page cache's until they are read (as llama.cpp maps its GGUF).
"""

import contextlib
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"GGUF"
SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
STRING, ARRAY = 8, 9
# GGML tensor types read here without the gguf package: id -> (name, block size, bytes per block)
TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    8: ("Q8_0", 32, 34),
    30: ("BF16", 1, 2),
}


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # GGML order: the fastest-varying dimension first
    type_id: int
    type_name: str
    data: np.ndarray  # uint8 [rows, bytes per row] for block types, else the values' dtype


class GGUFFile:
    def __init__(self, path: str | Path):
        with open(path, "rb") as f:
            # private and writable (torch wraps only writable arrays); nothing writes to it,
            # so its pages stay the page cache's
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        self.pos = len(MAGIC)
        magic, version = self.map[: len(MAGIC)], self._read("I")
        if magic != MAGIC or version < 2:
            raise ValueError(f"{path} is not a GGUF file of version 2 or later")
        n_tensors, n_fields = self._read("Q"), self._read("Q")
        self.fields = {}
        for _ in range(n_fields):
            key = self._string()
            self.fields[key] = self._value(self._read("I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            shape = tuple(self._read("Q") for _ in range(self._read("I")))
            infos.append((name, shape, self._read("I"), self._read("Q")))
        align = int(self.fields.get("general.alignment", 32))
        start = -(-self.pos // align) * align
        buf = np.frombuffer(self.map, dtype=np.uint8)
        self.tensors = [self._tensor(buf, start, *info) for info in infos]

    def release(self) -> None:
        """Drop the map's resident pages (once the weights are packed elsewhere): a tensor
        still in use (the embedding's blocks) reads its pages back from the page cache."""
        with contextlib.suppress(AttributeError, OSError):  # no madvise here: they stay
            self.map.madvise(mmap.MADV_DONTNEED)

    def _read(self, fmt: str):
        (value,) = struct.unpack_from("<" + fmt, self.map, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        n = self._read("Q")
        text = self.map[self.pos : self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return text

    def _value(self, kind: int):
        if kind == STRING:
            return self._string()
        if kind == ARRAY:
            item, n = self._read("I"), self._read("Q")
            if item in SCALARS:  # one unpack for the whole array
                fmt = f"<{n}{SCALARS[item]}"
                values = list(struct.unpack_from(fmt, self.map, self.pos))
                self.pos += struct.calcsize(fmt)
                return values
            return [self._value(item) for _ in range(n)]
        if kind not in SCALARS:
            raise ValueError(f"GGUF metadata type {kind} is unknown")
        return self._read(SCALARS[kind])

    def _tensor(self, buf, start, name, shape, type_id, offset) -> TensorInfo:
        if type_id in TYPES:
            type_name, block, block_bytes = TYPES[type_id]
        else:  # a rarer quantization: the gguf package knows its block size
            from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

            qtype = GGMLQuantizationType(type_id)
            type_name, (block, block_bytes) = qtype.name, GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(shape[1:], dtype=np.int64))
        row_bytes = shape[0] // block * block_bytes
        data = buf[start + offset : start + offset + rows * row_bytes].reshape(rows, row_bytes)
        if type_name in ("F32", "F16"):
            data = data.view(np.float32 if type_name == "F32" else np.float16)
            data = data.reshape(tuple(reversed(shape)))
        return TensorInfo(name, shape, type_id, type_name, data)


def dequantize(t: TensorInfo) -> np.ndarray:
    """A tensor in float32, shaped (out, in) as HF orders it."""
    shape = tuple(reversed(t.shape))
    if t.type_name in ("F32", "F16"):
        return t.data.astype(np.float32, copy=False).reshape(shape)
    if t.type_name == "BF16":
        return (t.data.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    w = gguf_dequantize(np.asarray(t.data), GGMLQuantizationType(t.type_id))
    return w.astype(np.float32, copy=False).reshape(shape)
