"""Int4Linear: Q4_1 weights on int4 kernels, the 4-bit codes kept bit for bit.

Our kernels (cpu_q4.cpp for bfloat16 activations, cpu_q4_f32.cpp for float32 ones on CPUs
without native bf16) read Q4_1's d and m as stored. Elsewhere torch's CPU int4 kernels serve:
they compute w = (q - 8)*scale + zero per group, so scale = d and zero = m + 8d, and take
activations, scales and zeros in bfloat16 (their float32 path is a slow reference loop), so d
and m are rounded to bfloat16. An int4 kernel is a fast matrix-vector product but a slow GEMM,
so forwards of more than DENSE_ROWS rows (prefill) run a dense GEMM on the same dequantized
weights: rebuilt for each forward where our kernels are built, else a dense copy.

Int4PairLinear runs a Q8_0 matrix (SmolLM2's tied embedding, i.e. the logits) on the same
kernels: each code is 16*hi + lo with hi in -8..7 and lo in 0..15, two int4 matrices with the
block's scale (16d and d), so the logits read 9 bits per weight instead of bfloat16's 16.
"""

import contextlib
import threading

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from engine.model.q4 import GROUP, Q4Weight
from engine.model.q8 import Q8Weight

DENSE_ROWS = 16  # measured crossover (bf16 GEMM vs int4 kernel): docs/performance.md
_PREFILL = threading.local()
# MKL's float32 GEMM rounds a row differently when there are 1-11 rows (measured; oneDNN's
# bfloat16 one does not): a float32 prefill GEMM gets at least this many
MIN_GEMM_ROWS = 16


@contextlib.contextmanager
def prefill_rounding():
    """Inside: every Int4Linear forward runs the GEMM, whatever its rows. A prompt's K/V then
    round the same however it is split (a prompt-cache hit prefills only its suffix, which may
    be a few rows): the GEMM's rows do not depend on how many there are, the int4 kernel
    rounds differently from it, and greedy output followed the split (docs/engine.md)."""
    _PREFILL.on = True
    try:
        yield
    finally:
        _PREFILL.on = False


def int4_kernels_available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")


def fuse_q4(parts: list[Q4Weight]) -> Q4Weight:
    return Q4Weight(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("q", "d", "m")))


PACK_ROWS = 4096  # the packing lays rows out in blocks of 64: packed in slices, then joined


def pack_int4(codes: np.ndarray, scale: np.ndarray, zero: np.ndarray, dtype: torch.dtype):
    """Codes 0..15 [out, in] and a scale and zero per group [out, in // 32], packed for the
    kernel (w = (code - 8)*scale + zero). Slices of rows keep the kernel's int32 input small
    (a whole vocabulary's was 113 MB at load)."""
    convert = torch.ops.aten._convert_weight_to_int4pack_for_cpu
    packed = torch.cat(
        [
            convert(torch.from_numpy(codes[i : i + PACK_ROWS].astype(np.int32)), 1)
            for i in range(0, codes.shape[0], PACK_ROWS)
        ]
    )
    sz = torch.stack([torch.from_numpy(scale).t(), torch.from_numpy(zero).t()], dim=-1)
    return packed, sz.contiguous().to(dtype)


def int4_mm(x: torch.Tensor, packed: tuple, matvec=None) -> torch.Tensor:
    """x times a matrix packed by pack_q4 for our kernel (`matvec`), else by pack_int4."""
    if matvec is not None:
        return matvec(x.contiguous(), *packed)
    return torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed[0], GROUP, packed[1])


def pack_q4(w: Q4Weight) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layout of cpu_q4.cpp's q4_matvec: codes [N/16, K/32, 4, 32] 16-bit words, word 2l+e
    of vector t holding output l's codes for dims 8t+2s+e of a group in nibble s (16 outputs
    side by side), and d and m [N/16, K/32, 16] in float16 (Q4_1's own precision: exact, not
    rounded to bfloat16)."""
    return pack_q4_rows(w.q.shape, lambda i, j: (w.q[i:j], w.d[i:j], w.m[i:j]))


def pack_q4_rows(shape: tuple[int, int], rows) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """pack_q4 of the matrix whose rows i:j are `rows(i, j)` (codes, d, m), PACK_ROWS at a time:
    the widening temporaries stay a few MB (a whole vocabulary's were several 56 MB arrays)."""
    N, K = shape
    slices = [_pack_slice(*rows(i, min(i + PACK_ROWS, N)), K) for i in range(0, N, PACK_ROWS)]
    if len(slices) == 1:
        return slices[0]
    return tuple(torch.cat(parts) for parts in zip(*slices, strict=True))


def _pack_slice(q: np.ndarray, d: np.ndarray, m: np.ndarray, K: int):
    n = q.shape[0] // 16
    q = q.astype(np.uint16).reshape(n, 16, K // GROUP, 4, 4, 2)  # [b, l, g, t, s, e]
    q = q.transpose(0, 2, 3, 1, 5, 4)  # [block, group, t, lane, e, s]
    words = q[..., 0] | q[..., 1] << 4 | q[..., 2] << 8 | q[..., 3] << 12
    codes = np.ascontiguousarray(words.reshape(n, K // GROUP, 4, 32)).view(np.int16)

    def per_group(a: np.ndarray) -> torch.Tensor:
        a = a.astype(np.float16).reshape(n, 16, K // GROUP).transpose(0, 2, 1)
        return torch.from_numpy(np.ascontiguousarray(a))

    return torch.from_numpy(codes), per_group(d), per_group(m)


class Int4Linear(nn.Module):
    """A Q4_1 matrix. Decode's few rows run on our kernel (`matvec`: kernels.cpu.q4_matvec for
    bfloat16 activations, q4_matvec_f32 for float32) where it is built, else on torch's
    (bfloat16 only). More rows (prefill) run a GEMM in the activations' dtype: with our kernel
    on W^T rebuilt for each forward (`weight_t`: no dense copy is kept, and the GEMM reads it
    from cache), else on a dense copy."""

    def __init__(
        self,
        w: Q4Weight | None,
        dtype: torch.dtype = torch.bfloat16,
        matvec=None,
        weight_t=None,
        packed: tuple | None = None,  # pack_q4's output, prepared earlier (w is then None)
    ):
        super().__init__()
        if packed is not None:
            self.out_features, self.in_features = (
                packed[0].shape[0] * 16,
                packed[0].shape[1] * GROUP,
            )
        else:
            self.out_features, self.in_features = w.q.shape
        self.dtype = dtype
        self.matvec = matvec if self.out_features % 16 == 0 else None
        if self.matvec is not None:
            self.packed = packed if packed is not None else pack_q4(w)
        elif dtype == torch.bfloat16:
            self.packed = pack_int4(w.q, w.d, w.m + 8 * w.d, dtype)
        else:  # torch's int4 kernel takes bfloat16 only: the dense copy serves every forward
            self.packed = None
        self.weight_t = weight_t if self.matvec is not None else None
        self.dense = None if self.weight_t else torch.from_numpy(w.dequantize()).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        prefill = getattr(_PREFILL, "on", False)
        if self.packed is None or prefill or x.numel() > DENSE_ROWS * self.in_features:
            rows = x.reshape(-1, self.in_features)
            n = rows.shape[0]
            if prefill and n < MIN_GEMM_ROWS and x.dtype == torch.float32:  # MKL's sgemm
                rows = F.pad(rows, (0, 0, 0, MIN_GEMM_ROWS - n))
            y = rows @ self.dequantized_t() if self.dense is None else F.linear(rows, self.dense)
            return y[:n].view(*x.shape[:-1], self.out_features)
        y = int4_mm(x.reshape(-1, self.in_features), self.packed, self.matvec)
        return y.view(*x.shape[:-1], self.out_features)

    def dequantized_t(self) -> torch.Tensor:
        """W^T [in, out] in the activations' dtype, as Q4Weight.dequantize rounds it, in a
        buffer its shape shares: a fresh one per forward was megabytes of new pages for the
        kernel to zero, a tenth of prefill's CPU time and much of its run-to-run spread."""
        out = _scratch(self.in_features, self.out_features, self.dtype)
        self.weight_t(*self.packed, out)
        return out


_SCRATCH = threading.local()  # one buffer per shape for each thread that runs forwards


def _scratch(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    """A buffer the caller fills and uses before its next forward (the GEMM reads it at once)."""
    buffers = _SCRATCH.__dict__.setdefault("buffers", {})
    key = (rows, cols, dtype)
    if key not in buffers:
        buffers[key] = torch.empty(rows, cols, dtype=dtype)
    return buffers[key]


class Int4PairLinear(nn.Module):
    """A Q8_0 matrix as two int4 matrices; float32 output, for any number of rows (the logits
    of a decode step or of prefill's last tokens: one rounding whatever the batch)."""

    def __init__(
        self,
        w: Q8Weight | None,
        dtype: torch.dtype = torch.bfloat16,
        matvec=None,
        packed: tuple | None = None,  # (hi, lo) as packed here with matvec, prepared earlier
        shape: tuple[int, int] | None = None,  # w's shape, where w is None
    ):
        super().__init__()
        self.out_features, self.in_features = w.q.shape if w is not None else shape
        self.matvec = matvec
        shape = (self.out_features + -self.out_features % 16, self.in_features)  # rows in 16s
        if packed is not None:
            self.hi, self.lo = packed
        elif matvec is not None:  # w = d*code + m
            self.hi = pack_q4_rows(shape, lambda i, j: _half(w, i, j, "hi"))
            self.lo = pack_q4_rows(shape, lambda i, j: _half(w, i, j, "lo"))
        else:  # w = (code - 8)*scale + zero
            (hi, d16, _), (lo, d, _) = (_half(w, 0, shape[0], h) for h in ("hi", "lo"))
            self.hi = pack_int4(hi, d16, np.zeros_like(d), dtype)
            self.lo = pack_int4(lo, d, 8 * d, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features)
        y = int4_mm(x2, self.hi, self.matvec).float() + int4_mm(x2, self.lo, self.matvec).float()
        return y[:, : self.out_features].reshape(*x.shape[:-1], self.out_features)


def _half(w: Q8Weight, i: int, j: int, half: str):
    """Rows i:j of one int4 half of a Q8_0 matrix as (codes, d, m), q = 16*(hi - 8) + lo; rows
    past the matrix are padding with scale 0 (their outputs 0)."""
    q, d = w.q[i:j], w.d[i:j]
    pad = ((0, j - i - q.shape[0]), (0, 0))
    q, d = np.pad(q, pad), np.pad(d, pad)
    if half == "hi":
        return ((q >> 4) + 8).astype(np.uint8), 16 * d, -128 * d
    return (q & 15).astype(np.uint8), d, np.zeros_like(d)
