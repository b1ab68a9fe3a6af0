"""SimBackend: the Backend interface with no compute. Each forward advances a virtual clock by
the cost model's seconds for its shape, keeps the K/V lengths a real backend would, notes the
mask bytes it would materialize, and answers logits that pick one ordinary token, so
max_tokens, ignore_eos and the scheduler's stop checks behave as in a served run."""

from types import SimpleNamespace

import numpy as np

from engine.backends.base import Backend, DeviceMemory
from engine.model.args import ModelArgs
from engine.sim.clock import VirtualClock
from engine.sim.costs import CostModel


class SimCache:
    def __init__(self, capacity: int):
        self.capacity, self.length = capacity, 0


class SimBackend(Backend):
    name = "sim"
    device = "virtual"
    decode_path = prefill_path = "simulated"

    def __init__(self, args: ModelArgs, costs: CostModel, clock: VirtualClock, token: int):
        super().__init__(SimpleNamespace(args=args))
        self.costs, self.clock, self.token = costs, clock, token
        self.dtype = self.activations = "simulated"
        self.runtime = {"sim": costs.name}
        self.weights_from = "none (simulated)"
        self.kv_bytes_max = 0  # the most K/V the live sequences held at once

    def add_sequence(self, seq_id: int, capacity: int) -> None:
        self.caches[seq_id] = SimCache(capacity)

    @property
    def element_size(self) -> int:
        return 2  # bfloat16 K/V, as the CPU and CUDA pools hold them

    def _forward(self, kind: str, ids: list[int], tokens: list[int]) -> np.ndarray:
        caches = [self.caches[i] for i in ids]
        for c, n in zip(caches, tokens, strict=True):
            self._check_room(c, n)
        offsets = [c.length for c in caches]
        self.clock.advance(self.costs.seconds(kind, tokens, offsets))
        for c, n in zip(caches, tokens, strict=True):
            c.length += n
        live = self.kv_bytes(sum(c.length for c in self.caches.values()))
        self.kv_bytes_max = max(self.kv_bytes_max, live)
        logits = np.zeros((len(ids), self.args.vocab_size), dtype=np.float32)
        logits[:, self.token] = 1.0
        return logits

    def prefill_batch(self, seq_ids: list[int], prompts: list[list[int]]) -> np.ndarray:
        lengths = [len(p) for p in prompts]
        offsets = [self.caches[i].length for i in seq_ids]
        span = max(o + n for o, n in zip(offsets, lengths, strict=True))
        self._note_mask(4 * len(prompts) * max(lengths) * span)  # float32 [B, L, S]
        return self._forward("prefill_batched", seq_ids, lengths)

    def prefill(self, seq_id: int, tokens: list[int]) -> np.ndarray:
        offset = self.caches[seq_id].length
        self._note_mask(4 * len(tokens) * (offset + len(tokens)))
        return self._forward("prefill_single", [seq_id], [len(tokens)])[0]

    def decode(self, seq_ids: list[int], tokens: list[int]) -> np.ndarray:
        return self._forward("decode", seq_ids, [1] * len(seq_ids))

    def copy_prefix(self, src_kv: object, seq_id: int, n_tokens: int) -> None:
        self._check_room(self.caches[seq_id], n_tokens)
        self.caches[seq_id].length = n_tokens

    def save_prefix(self, seq_id: int, n_tokens: int) -> tuple[object, int]:
        return None, self.kv_bytes(n_tokens)

    def device_memory(self) -> DeviceMemory | None:
        return None

    def reset_device_peak(self) -> None:
        return None
