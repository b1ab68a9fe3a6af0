"""Q8Embedding: token embeddings looked up in Q8_0 blocks where they lie (the GGUF's map).

A dense bfloat16 copy of SmolLM2's 49,152 x 576 table is 56 MB of anonymous memory; a lookup
reads a few rows. This gathers the looked-up rows' blocks and dequantizes only them, exactly as
Q8Weight.dequantize does (float32, then the activations' dtype), so the pages of rows never
asked for stay in the page cache.
"""

import numpy as np
import torch
from torch import nn

from engine.model.q4 import GROUP
from engine.model.q8 import BLOCK_BYTES


class Q8Embedding(nn.Module):
    def __init__(self, blocks: np.ndarray, dim: int, dtype: torch.dtype):
        super().__init__()
        self.blocks = torch.from_numpy(blocks)  # uint8 [V, dim / 32 * 34], shared, not copied
        self.dim, self.dtype = dim, dtype

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        rows = self.blocks[tokens.reshape(-1)].view(-1, self.dim // GROUP, BLOCK_BYTES)
        d = rows[..., :2].contiguous().view(torch.float16).float()  # [N, groups, 1]
        q = rows[..., 2:].contiguous().view(torch.int8).float()  # [N, groups, 32]
        return (q * d).reshape(*tokens.shape, self.dim).to(self.dtype)
