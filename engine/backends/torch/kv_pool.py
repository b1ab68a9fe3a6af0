"""KVPool: the K and V of every live sequence in one tensor each, [layers, slots, KVH, C, D].

A sequence owns one slot; its KVCache is a view of that slot, so prefill writes it like a
private cache, while a decode step writes every row's new K/V with one indexed store per
layer and attends over the window of slots lo..hi with one matmul (rows outside the batch are
masked and dropped). The engine reserves it once for its slots and context (`reserve`); a
backend used on its own grows it (slots doubling, capacity in CAPACITY_STEP tokens) by copying.

On a CPU the pool is anonymous memory mapped, not filled: a page becomes resident when a token's
K/V is first written into it (unwritten pages read as zeros), so reserving every slot at the
whole context costs nothing until used, and a removed sequence's pages are handed back to the
OS (what a burst grew does not stay resident).
"""

import contextlib
import math
import mmap
from dataclasses import dataclass

import torch

from engine.model.args import ModelArgs

CAPACITY_STEP = 256


class KVCache:
    """One sequence's slot: k, v are [layers, KVH, capacity, D] views into the pool."""

    def __init__(self, slot: int, capacity: int):
        self.slot, self.capacity = slot, capacity
        self.length = 0  # tokens written, advanced by the backend after each forward
        self.k = self.v = None

    def update_and_fetch(self, layer: int, k: torch.Tensor, v: torch.Tensor, offset: int):
        """Store k, v ([KVH, T, D]) at offset; return the layer's K, V up to offset + T."""
        end = offset + k.shape[1]
        self.k[layer, :, offset:end] = k
        self.v[layer, :, offset:end] = v
        return self.k[layer, :, :end], self.v[layer, :, :end]


class KVPool:
    def __init__(self, args: ModelArgs, dtype: torch.dtype, device: torch.device):
        self.args, self.dtype, self.device = args, dtype, device
        self.k = self.v = None
        self._maps: tuple[mmap.mmap, mmap.mmap] | None = None  # a CPU pool's pages
        self.caches: dict[int, KVCache] = {}  # by slot

    def add(self, capacity: int) -> KVCache:
        slot = next(s for s in range(len(self.caches) + 1) if s not in self.caches)
        cache = KVCache(slot, capacity)
        self.caches[slot] = cache
        slots = self.k.shape[1] if self.k is not None else 0
        cap = self.k.shape[3] if self.k is not None else 0
        if slot >= slots or capacity > cap:
            step = CAPACITY_STEP
            grown = max(slots, slot + 1) if slot < slots else max(2 * slots, slot + 1)
            self._grow(grown, max(cap, -(-capacity // step) * step))
        cache.k, cache.v = self.k[:, slot], self.v[:, slot]
        return cache

    def reserve(self, slots: int, capacity: int) -> None:
        """Size the pool once for `slots` sequences of up to `capacity` tokens (CPU only: on
        a device the memory would be taken at once)."""
        if self.k is None and self.device.type == "cpu":
            self._grow(slots, -(-capacity // CAPACITY_STEP) * CAPACITY_STEP)

    def remove(self, cache: KVCache) -> None:
        self.caches.pop(cache.slot, None)
        if self._maps is None:
            return
        # the slot's pages back to the OS: [KVH, C, D] of one layer and slot is contiguous
        _, slots, heads, cap, dim = self.k.shape
        size = heads * cap * dim * self.k.element_size()
        for buf in self._maps:
            for layer in range(self.k.shape[0]):
                start = (layer * slots + cache.slot) * size
                first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
                end = (start + size) // mmap.PAGESIZE * mmap.PAGESIZE
                if end > first:
                    with contextlib.suppress(OSError, AttributeError):
                        buf.madvise(mmap.MADV_DONTNEED, first, end - first)

    def _grow(self, slots: int, cap: int) -> None:
        a = self.args
        shape = (a.num_hidden_layers, slots, a.num_key_value_heads, cap, a.head_dim)
        # zeros, not empty: masked-out positions must hold finite values (0 * NaN is NaN)
        (k, kmap), (v, vmap) = self._zeros(shape), self._zeros(shape)
        self._maps = (kmap, vmap) if kmap is not None else None
        if self.k is not None:
            _, s, _, c, _ = self.k.shape
            k[:, :s, :, :c] = self.k
            v[:, :s, :, :c] = self.v
        self.k, self.v = k, v
        for c in self.caches.values():
            c.k, c.v = k[:, c.slot], v[:, c.slot]

    def _zeros(self, shape: tuple) -> tuple[torch.Tensor, mmap.mmap | None]:
        """A zero tensor; on a CPU, over fresh anonymous pages (zero until written)."""
        if self.device.type != "cpu":
            return torch.zeros(shape, dtype=self.dtype, device=self.device), None
        count = math.prod(shape)
        nbytes = count * torch.empty((), dtype=self.dtype).element_size()
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
        buf = mmap.mmap(-1, max(nbytes, 1), flags=flags)
        return torch.frombuffer(buf, dtype=self.dtype, count=count).view(shape), buf

    def decode_rows(self, caches: list[KVCache]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's slot and the position its new token goes to ([B] each): all a fused
        decode step needs (no window or mask)."""
        slots = torch.tensor([c.slot for c in caches], device=self.device)
        return slots, torch.tensor([c.length for c in caches], device=self.device)

    def decode_view(self, caches: list[KVCache]) -> "DecodeView":
        """The batch's slot window and mask for one decode step (each row adds one token)."""
        slots = [c.slot for c in caches]
        lo, hi = min(slots), max(slots)
        width = max(c.length for c in caches) + 1
        lengths = torch.ones(hi - lo + 1, dtype=torch.long)  # rows outside the batch: 1
        lengths[[s - lo for s in slots]] = torch.tensor([c.length + 1 for c in caches])
        mask = torch.zeros((hi - lo + 1, 1, 1, width), dtype=torch.float32)
        mask.masked_fill_(torch.arange(width).view(1, 1, 1, -1) >= lengths.view(-1, 1, 1, 1), -1e30)
        rows = torch.tensor([s - lo for s in slots], device=self.device)
        identity = slots == list(range(lo, hi + 1))
        slots_t, positions = self.decode_rows(caches)
        return DecodeView(
            self,
            slots=slots_t,
            positions=positions,
            lo=lo,
            width=width,
            rows=None if identity else rows,
            window=hi - lo + 1,
            mask=mask.to(self.device, self.dtype),
            lengths=lengths.to(self.device),
        )


@dataclass
class DecodeView:
    pool: KVPool
    slots: torch.Tensor  # [B] each row's slot
    positions: torch.Tensor  # [B] where each row's new token goes
    lo: int  # first slot of the window
    width: int  # keys attended: the longest row's length after this step
    rows: torch.Tensor | None  # [B] each row's index in the window; None when row b is slot lo+b
    window: int  # slots in the window
    mask: torch.Tensor  # additive [window, 1, 1, width], in the pool's dtype
    lengths: torch.Tensor  # [window] keys each window row attends (the kernel's mask)

    def write_and_view(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Store each row's new k, v ([B, KVH, D]); return the window's K, V [W, KVH, S, D]."""
        pk, pv = self.pool.k[layer], self.pool.v[layer]
        pk[self.slots, :, self.positions] = k.to(pk.dtype)
        pv[self.slots, :, self.positions] = v.to(pv.dtype)
        end = self.lo + self.window
        return pk[self.lo : end, :, : self.width], pv[self.lo : end, :, : self.width]

    def to_window(self, x: torch.Tensor) -> torch.Tensor:
        if self.rows is None:
            return x
        out = x.new_zeros((self.window, *x.shape[1:]))
        out[self.rows] = x
        return out

    def from_window(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.rows is None else x[self.rows]
