"""Q8_0 weights kept as GGUF stores them: 8-bit codes with one scale per 32 weights."""

from functools import cached_property

import numpy as np

from engine.model.q4 import GROUP

BLOCK_BYTES = 2 + GROUP  # fp16 d, 32 int8 codes


class Q8Weight:
    """w[o, i] = d[o, i // 32] * q[o, i], q in -128..127; (out, in) like HF. Made from a file's
    blocks (`from_q8_0_blocks`), q and d are decoded when first read: a lookup that reads the
    blocks themselves (the embedding) never decodes them."""

    def __init__(self, q=None, d=None, blocks: np.ndarray | None = None, shape=None):
        if q is not None:
            self.q, self.d = q, d  # int8 [out, in]; float32 [out, in // 32] (the fp16 values)
        self.blocks = blocks  # GGML blocks [out, in // 32 * 34], where they came from a file
        self.shape = tuple(q.shape) if q is not None else shape

    @cached_property
    def q(self) -> np.ndarray:
        return self._grouped()[..., 2:].copy().view(np.int8).reshape(self.shape)

    @cached_property
    def d(self) -> np.ndarray:
        return self._grouped()[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)

    def _grouped(self) -> np.ndarray:
        out, inp = self.shape
        return np.asarray(self.blocks).view(np.uint8).reshape(out, inp // GROUP, BLOCK_BYTES)

    def rows(self, i: int, j: int) -> "Q8Weight":
        return Q8Weight(self.q[i:j], self.d[i:j])

    def dequantize(self) -> np.ndarray:
        out, inp = self.shape
        g = self.q.reshape(out, inp // GROUP, GROUP).astype(np.float32)
        return (g * self.d[..., None]).reshape(out, inp)


def from_q8_0_blocks(raw: np.ndarray, out: int, inp: int) -> Q8Weight:
    """GGML Q8_0 blocks (row-major, `inp` weights per row): per block d, then 32 codes."""
    return Q8Weight(
        blocks=np.asarray(raw).reshape(out, inp // GROUP * BLOCK_BYTES), shape=(out, inp)
    )
