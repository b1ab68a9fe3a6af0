"""The compute interface the scheduler drives; torch and MLX implement it.

Sequences are named by the caller's integer ids; each owns a KV cache slot of a fixed token
capacity. Every call returns float32 logits of each row's last token as numpy arrays.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from engine.model.load import LoadedModel


@dataclass
class DeviceMemory:
    active_bytes: int
    peak_bytes: int


class Backend(ABC):
    name: str
    device: str
    dtype: str
    activations: str  # what the forward computes in: dtype, except int4 (bfloat16 or float32)
    runtime: dict  # the array library and its versions, as /health reports them
    # a decode step: "torch" (or "mlx") ops, "kernel" (torch ops, our attention kernel), or
    # "fused" (each block one C++ call)
    decode_path = "torch"
    prefill_path = "torch"  # prefill attention: "torch" (SDPA), "kernel" (ours) or "mlx"
    weights_from = "model file"  # packed int4: "prepared file", "packed" or "packed, then saved"

    def __init__(self, loaded: LoadedModel):
        self.args = loaded.args
        self.mask_bytes_last = 0  # bytes of the last prefill attention mask materialized
        self.mask_bytes_max = 0
        self.caches: dict[int, object] = {}  # seq_id -> the backend's KVCache

    def _note_mask(self, nbytes: int) -> None:
        self.mask_bytes_last = nbytes
        self.mask_bytes_max = max(self.mask_bytes_max, nbytes)

    # Per-sequence bookkeeping, shared: each backend's `model.make_cache(capacity)` returns a
    # cache with `length` and `capacity`.
    def add_sequence(self, seq_id: int, capacity: int) -> None:
        """Reserve a KV slot of `capacity` tokens for a new sequence."""
        self.caches[seq_id] = self.model.make_cache(capacity)

    def reserve_kv(self, slots: int, capacity: int) -> None:
        """The most sequences and tokens each the caller will ask for (a hint: may be ignored)."""
        return None

    def remove_sequence(self, seq_id: int) -> None:
        """Free the sequence's KV slot."""
        self.caches.pop(seq_id, None)

    def seq_length(self, seq_id: int) -> int:
        """Tokens already in the sequence's KV cache."""
        return self.caches[seq_id].length

    def _check_room(self, cache, n: int) -> None:
        if cache.length + n > cache.capacity:
            raise ValueError(f"sequence needs {cache.length + n} KV slots, has {cache.capacity}")

    @abstractmethod
    def prefill_batch(self, seq_ids: list[int], prompts: list[list[int]]) -> np.ndarray:
        """New tokens of B sequences, right-padded to the longest L, as ONE forward. Cold rows
        only: a materialized additive [B, L, L] mask over the step's own K/V. Rows that already
        hold a cached prefix (prompt-cache hits): a [B, L, S] mask over each row's prefix and
        new tokens, S the longest prefix + new. Returns [B, V]."""

    @abstractmethod
    def prefill(self, seq_id: int, tokens: list[int]) -> np.ndarray:
        """Extend one sequence from its cached prefix: a [T, offset+T] forward. Returns [V]."""

    @abstractmethod
    def decode(self, seq_ids: list[int], tokens: list[int]) -> np.ndarray:
        """One token for each of B sequences at their own lengths, one forward. Returns [B, V]."""

    @abstractmethod
    def copy_prefix(self, src_kv: object, seq_id: int, n_tokens: int) -> None:
        """Load the first n_tokens of a saved KV prefix into an empty sequence."""

    @abstractmethod
    def save_prefix(self, seq_id: int, n_tokens: int) -> tuple[object, int]:
        """A standalone copy of a sequence's first n_tokens of KV and its size in bytes."""

    @abstractmethod
    def device_memory(self) -> DeviceMemory | None:
        """Allocator counters of the device, or None where there are none (CPU torch)."""

    @abstractmethod
    def reset_device_peak(self) -> None: ...

    def available_memory(self) -> int | None:
        """Free bytes where KV will live (device memory); None means host memory."""
        return None

    def kv_bytes(self, n_tokens: int) -> int:
        return n_tokens * self.args.kv_bytes_per_token * self.element_size

    @property
    @abstractmethod
    def element_size(self) -> int: ...
