"""MLX backend (CPU, Metal, CUDA): weights, per-sequence KV caches, masks and the three forwards."""

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from engine.backends.base import Backend, DeviceMemory
from engine.backends.mlx.llama import Model, Step
from engine.model.load import LoadedModel

DTYPES = {"float32": mx.float32, "bfloat16": mx.bfloat16, "float16": mx.float16}


def resolve_device(device: str) -> mx.Device:
    if device == "auto":
        return mx.default_device()
    if device not in ("cpu", "gpu"):
        raise ValueError(f"unknown MLX device {device!r}: use auto, cpu or gpu")
    d = mx.Device(mx.gpu if device == "gpu" else mx.cpu)
    if not mx.is_available(d):
        raise ValueError(f"--device {device}: MLX sees no such device")
    return d


def resolve_dtype(dtype: str, device: mx.Device) -> mx.Dtype:
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
        return DTYPES[dtype]
    return mx.bfloat16 if device.type == mx.gpu else mx.float32


def _memory_fn(name: str):
    """mx.<name>, or mx.metal.<name> in MLX versions before the allocator API moved up."""
    fn = getattr(mx, name, None)
    return fn if fn is not None else getattr(mx.metal, name)


class MLXBackend(Backend):
    name = "mlx"
    decode_path = "mlx"
    prefill_path = "mlx"

    def __init__(self, loaded: LoadedModel, device: str = "auto", dtype: str = "auto"):
        super().__init__(loaded)
        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype, self._device)
        self.device = "gpu" if self._device.type == mx.gpu else "cpu"
        self.dtype = self.activations = next(k for k, v in DTYPES.items() if v == self._dtype)
        self.runtime = {"mlx": mx.__version__}
        self.model = Model(loaded.args)
        expected = {k for k, _ in tree_flatten(self.model.parameters())}
        missing, unexpected = expected - loaded.weights.keys(), loaded.weights.keys() - expected
        if missing or unexpected:
            raise ValueError(
                f"weights do not fit the model: missing {sorted(missing)[:3]}, "
                f"unexpected {sorted(unexpected)[:3]}"
            )
        self.model.load_weights([(k, mx.array(v, self._dtype)) for k, v in loaded.weights.items()])
        self.model.init_rope()
        mx.eval(self.model.parameters())

    @property
    def element_size(self) -> int:
        return self._dtype.size

    def _run(self, tokens: np.ndarray, step: Step, rows: tuple) -> np.ndarray:
        """Forward, logits of the tokens at `rows` (an index tuple into [B, T]), and the caches'
        new K/V evaluated together so no lazy graph outlives the call."""
        h = self.model(mx.array(tokens), step)
        logits = self.model.logits(h[rows])
        mx.eval(logits, *[a for c in step.caches for a in c.state])
        return np.array(logits)

    def prefill_batch(self, seq_ids: list[int], prompts: list[list[int]]) -> np.ndarray:
        caches = [self.caches[s] for s in seq_ids]
        for c, p in zip(caches, prompts, strict=True):
            self._check_room(c, len(p))
        offsets = [c.length for c in caches]
        lengths = [len(p) for p in prompts]
        B, L = len(prompts), max(lengths)
        cold = not any(offsets)
        S = L if cold else max(o + t for o, t in zip(offsets, lengths, strict=True))
        tokens = np.zeros((B, L), dtype=np.int32)
        for b, p in enumerate(prompts):
            tokens[b, : len(p)] = p
        with mx.stream(self._device):
            off = mx.array(offsets).reshape(B, 1, 1)
            n = mx.array(lengths).reshape(B, 1, 1)
            i = mx.arange(L).reshape(1, L, 1)
            j = mx.arange(S).reshape(1, 1, S)
            # keys: each row's cached prefix (none when cold), then its new tokens; a padding
            # query (i >= n) sees all of them, so no softmax row is empty
            allowed = (j <= off + i) & (j < off + n)
            mask = mx.where(allowed, mx.array(0.0, mx.float32), mx.array(-mx.inf, mx.float32))
            mx.eval(mask)
            self._note_mask(mask.nbytes)
            top = self.args.max_position_embeddings - 1  # padding past a long prefix: clamped
            step = Step(
                positions=mx.minimum(off.reshape(B, 1) + mx.arange(L), top),
                caches=caches,
                offsets=offsets,
                lengths=lengths,
                mask=mask[:, None].astype(self._dtype),
                self_attend=cold,
            )
            del mask
            logits = self._run(tokens, step, (mx.arange(B), mx.array(lengths) - 1))
        for c, length in zip(caches, lengths, strict=True):
            c.length += length
        return logits

    def prefill(self, seq_id: int, tokens: list[int]) -> np.ndarray:
        cache = self.caches[seq_id]
        self._check_room(cache, len(tokens))
        off, T = cache.length, len(tokens)
        with mx.stream(self._device):
            i = mx.arange(T).reshape(T, 1)
            j = mx.arange(off + T).reshape(1, off + T)
            mask = mx.where(j > off + i, mx.array(-mx.inf, mx.float32), mx.array(0.0, mx.float32))
            mx.eval(mask)
            self._note_mask(mask.nbytes)
            step = Step(
                positions=mx.arange(off, off + T).reshape(1, T),
                caches=[cache],
                offsets=[off],
                lengths=[T],
                mask=mask.reshape(1, 1, T, off + T).astype(self._dtype),
                self_attend=False,
            )
            logits = self._run(np.array([tokens], dtype=np.int32), step, (0, -1))
        cache.length += T
        return logits

    def decode(self, seq_ids: list[int], tokens: list[int]) -> np.ndarray:
        caches = [self.caches[s] for s in seq_ids]
        for c in caches:
            self._check_room(c, 1)
        offsets = [c.length for c in caches]
        with mx.stream(self._device):
            # one attention over every row's keys: row b sees its first offsets[b] + 1 of S
            n = mx.array(offsets).reshape(-1, 1, 1, 1) + 1
            j = mx.arange(max(offsets) + 1).reshape(1, 1, 1, -1)
            mask = mx.where(j < n, mx.array(0.0, self._dtype), mx.array(-mx.inf, self._dtype))
            step = Step(
                positions=mx.array(offsets).reshape(-1, 1),
                caches=caches,
                offsets=offsets,
                lengths=[1] * len(caches),
                mask=mask,
                self_attend=False,
            )
            tokens_in = np.array(tokens, dtype=np.int32).reshape(-1, 1)
            logits = self._run(tokens_in, step, (slice(None), 0))
        for c in caches:
            c.length += 1
        return logits

    def save_prefix(self, seq_id: int, n_tokens: int) -> tuple[object, int]:
        c = self.caches[seq_id]
        k = mx.stack([a[:, :n_tokens] for a in c.k])
        v = mx.stack([a[:, :n_tokens] for a in c.v])
        mx.eval(k, v)
        return (k, v), k.nbytes + v.nbytes

    def copy_prefix(self, src_kv: object, seq_id: int, n_tokens: int) -> None:
        k, v = src_kv
        c = self.caches[seq_id]
        assert c.length == 0
        self._check_room(c, n_tokens)
        for layer in range(len(c.k)):
            c.k[layer][:, :n_tokens] = k[layer, :, :n_tokens]
            c.v[layer][:, :n_tokens] = v[layer, :, :n_tokens]
        mx.eval(*c.state)
        c.length = n_tokens

    def device_memory(self) -> DeviceMemory | None:
        active = _memory_fn("get_active_memory")()
        # MLX zeroes the peak on reset (torch sets it to the live bytes); report it as torch does.
        return DeviceMemory(active, max(active, _memory_fn("get_peak_memory")()))

    def reset_device_peak(self) -> None:
        _memory_fn("reset_peak_memory")()
