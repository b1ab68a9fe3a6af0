"""Q4_1 weights kept as GGUF stores them: 4-bit codes with a scale and a min per 32 weights."""

from dataclasses import dataclass

import numpy as np

GROUP = 32
BLOCK_BYTES = 4 + GROUP // 2  # fp16 d, fp16 m, 32 nibbles


@dataclass
class Q4Weight:
    """w[o, i] = d[o, i // 32] * q[o, i] + m[o, i // 32], q in 0..15; (out, in) like HF."""

    q: np.ndarray  # uint8 [out, in]
    d: np.ndarray  # float32 [out, in // 32] (exactly the stored fp16 values)
    m: np.ndarray  # float32 [out, in // 32]

    def dequantize(self) -> np.ndarray:
        out, inp = self.q.shape
        g = self.q.reshape(out, inp // GROUP, GROUP).astype(np.float32)
        return (g * self.d[..., None] + self.m[..., None]).reshape(out, inp)

    def rows(self, i: int, j: int) -> "Q4Weight":
        return Q4Weight(self.q[i:j], self.d[i:j], self.m[i:j])

    def permute_rows(self, perm: np.ndarray) -> "Q4Weight":
        return Q4Weight(self.q[perm], self.d[perm], self.m[perm])


def from_q4_1_blocks(raw: np.ndarray, out: int, inp: int) -> Q4Weight:
    """Decode GGML Q4_1 blocks (row-major, `inp` weights per row): per block d, m, then 16 bytes
    whose low nibbles are weights 0..15 and high nibbles weights 16..31."""
    blocks = np.ascontiguousarray(raw).view(np.uint8).reshape(out, inp // GROUP, BLOCK_BYTES)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    qs = blocks[..., 4:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).reshape(out, inp)
    return Q4Weight(q, d, m)


def quantize_q4_1(w: np.ndarray) -> Q4Weight:
    """Round-to-nearest Q4_1 of a float matrix, as llama.cpp's reference quantizer does (for
    tests and for float checkpoints; scales kept in fp16 precision like GGUF)."""
    out, inp = w.shape
    g = w.reshape(out, inp // GROUP, GROUP).astype(np.float32)
    lo, hi = g.min(-1), g.max(-1)
    d = ((hi - lo) / 15).astype(np.float16).astype(np.float32)
    m = lo.astype(np.float16).astype(np.float32)
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.rint((g - m[..., None]) * inv[..., None]), 0, 15).astype(np.uint8)
    return Q4Weight(q.reshape(out, inp), d, m)
