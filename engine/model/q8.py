"""Q8_0 weights kept as GGUF stores them: 8-bit codes with one scale per 32 weights."""

from dataclasses import dataclass

import numpy as np

from engine.model.q4 import GROUP

BLOCK_BYTES = 2 + GROUP  # fp16 d, 32 int8 codes


@dataclass
class Q8Weight:
    """w[o, i] = d[o, i // 32] * q[o, i], q in -128..127; (out, in) like HF."""

    q: np.ndarray  # int8 [out, in]
    d: np.ndarray  # float32 [out, in // 32] (exactly the stored fp16 values)

    def dequantize(self) -> np.ndarray:
        out, inp = self.q.shape
        g = self.q.reshape(out, inp // GROUP, GROUP).astype(np.float32)
        return (g * self.d[..., None]).reshape(out, inp)


def from_q8_0_blocks(raw: np.ndarray, out: int, inp: int) -> Q8Weight:
    """Decode GGML Q8_0 blocks (row-major, `inp` weights per row): per block d, then 32 codes."""
    blocks = np.ascontiguousarray(raw).view(np.uint8).reshape(out, inp // GROUP, BLOCK_BYTES)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    q = blocks[..., 2:].copy().view(np.int8).reshape(out, inp)
    return Q8Weight(q, d)
