"""Int4Linear: Q4_1 weights on torch's CPU int4 kernels, the 4-bit codes kept bit for bit.

Q4_1 stores w = d*q + m per 32 weights; the kernels compute w = (q - 8)*scale + zero per group,
so scale = d and zero = m + 8d. The kernels take activations, scales and zeros in bfloat16
(their float32 path is a slow reference loop), so d and m are rounded to bfloat16. The int4
kernel is a fast matrix-vector product but a slow GEMM, so forwards of more than DENSE_ROWS
rows (prefill) use a bfloat16 copy of the same dequantized weights instead.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from engine.model.q4 import GROUP, Q4Weight

DENSE_ROWS = 16  # measured crossover (bf16 GEMM vs int4 kernel): docs/performance.md


def int4_kernels_available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")


def fuse_q4(parts: list[Q4Weight]) -> Q4Weight:
    return Q4Weight(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("q", "d", "m")))


class Int4Linear(nn.Module):
    def __init__(self, w: Q4Weight, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        q = torch.from_numpy(w.q.astype(np.int32))
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        d, m = torch.from_numpy(w.d), torch.from_numpy(w.m)
        self.scales_zeros = torch.stack([d.t(), (m + 8 * d).t()], dim=-1).contiguous().to(dtype)
        self.out_features, self.in_features = w.q.shape
        self.dense = torch.from_numpy(w.dequantize()).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() > DENSE_ROWS * self.in_features:
            return F.linear(x, self.dense)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x.reshape(-1, self.in_features), self.packed, GROUP, self.scales_zeros
        )
        return y.view(*x.shape[:-1], self.out_features)
