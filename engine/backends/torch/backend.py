"""PyTorch backend (CPU and CUDA): weights, the KV pool, masks and the three forwards."""

import numpy as np
import torch

from engine.backends.base import Backend, DeviceMemory
from engine.backends.kernels.cpu import (
    HEAD_DIMS,
    decode_attention,
    decode_layer,
    prefill_attention,
    q4_matvec,
    q4_matvec_f32,
    q4_weight_t,
    q4_weight_t_f32,
    rms_norm,
    swiglu,
)
from engine.backends.kernels.cpu_features import cpu_has_native_bf16
from engine.backends.torch.fused_decode import FusedDecode
from engine.backends.torch.int4 import (
    PACK_ROWS,
    Int4Linear,
    Int4PairLinear,
    fuse_q4,
    int4_kernels_available,
    prefill_rounding,
)
from engine.backends.torch.kv_pool import KVPool
from engine.backends.torch.llama import Model, RMSNorm, Step, fuse_names
from engine.backends.torch.prepared import PreparedWeights
from engine.backends.torch.q8_embedding import Q8Embedding
from engine.model.load import LoadedModel

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INT4 = "int4"  # Q4_1 matrices on int4 kernels; the rest in bfloat16 (float32 without native bf16)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device, has_q4: bool, int4_f32: bool = False) -> str:
    """A DTYPES name or INT4. auto: CUDA bfloat16; a CPU with native bf16 dot products
    (avx512_bf16 or AMX) int4 when the model ships Q4_1 weights, else bfloat16; any other CPU
    (bf16 is emulated there, and slower) int4 with float32 activations where our float32 int4
    kernels are built (`int4_f32`: AVX2 and FMA), else float32."""
    int4_ok = device.type == "cpu" and has_q4 and (int4_kernels_available() or int4_f32)
    if dtype == INT4:
        if not int4_ok:
            raise ValueError("--dtype int4 needs a CPU device and a model with Q4_1 weights")
        return INT4
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}, int4")
        return dtype
    if device.type == "cuda":
        return "bfloat16"
    if cpu_has_native_bf16():
        return INT4 if int4_ok else "bfloat16"
    return INT4 if int4_ok and int4_f32 else "float32"


class TorchBackend(Backend):
    name = "torch"

    def __init__(
        self,
        loaded: LoadedModel,
        device: str = "auto",
        dtype: str = "auto",
        kernels: bool = True,  # our CPU kernels where they build (kernels/cpu.py)
        fused: bool = True,  # and, for int4, each block's decode in one call
    ):
        super().__init__(loaded)
        self._device = resolve_device(device)
        cpu = self._device.type == "cpu" and loaded.args.head_dim in HEAD_DIMS
        # int4 without native bf16: float32 activations on our AVX2 kernels, where built
        f32 = kernels and cpu and not cpu_has_native_bf16() and q4_matvec_f32() is not None
        self.dtype = resolve_dtype(dtype, self._device, bool(loaded.q4), int4_f32=f32)
        if self.dtype == INT4:
            self._dtype = torch.float32 if f32 else torch.bfloat16
        else:
            self._dtype = DTYPES[self.dtype]
        self.activations = str(self._dtype).removeprefix("torch.")
        self.device = str(self._device)
        self.runtime = {"torch": torch.__version__, "cuda": torch.version.cuda}
        with torch.device("meta"):
            self.model = Model(loaded.args)
        if self._dtype == torch.float32:
            matvec = q4_matvec_f32() if f32 else None
            weight_t = q4_weight_t_f32() if f32 else None
        else:
            matvec = q4_matvec() if kernels and cpu else None
            weight_t = q4_weight_t() if matvec else None
        head = (
            "lm_head.weight" if "lm_head.weight" in loaded.weights else "model.embed_tokens.weight"
        )
        embed = "model.embed_tokens.weight"
        q8_embed = self.dtype == INT4 and embed in loaded.q8
        # packed matrices for our kernels, saved once per GGUF and mapped after
        flavour = f"{self.activations}-{'ours' if matvec else 'torch'}"
        source = loaded.mapped and loaded.source
        prepared = PreparedWeights(source if matvec is not None else None, flavour)
        state = {}
        for target, names in fuse_names(loaded.weights).items():
            if target == embed and q8_embed and (blocks := loaded.q8[embed].blocks) is not None:
                dim = loaded.args.hidden_size
                self.model.model.embed_tokens = Q8Embedding(blocks, dim, self._dtype)
                continue
            if self.dtype == INT4 and all(n in loaded.q4 for n in names):
                packed = prepared.get(target, 3)
                w = None if packed else fuse_q4([loaded.q4[n] for n in names])
                linear = Int4Linear(w, self._dtype, matvec, weight_t, packed)
                if packed is None and linear.matvec is not None:
                    prepared.put(target, linear.packed)
                module = self.model.get_submodule(target.removesuffix(".weight"))
                parent, _, attr = target.removesuffix(".weight").rpartition(".")
                assert module.weight.shape == (linear.out_features, linear.in_features), target
                setattr(self.model.get_submodule(parent), attr, linear)
                continue
            state[target] = self._dense(loaded, names)
        missing, unexpected = self.model.load_state_dict(state, strict=False, assign=True)
        if missing or unexpected:
            raise ValueError(
                f"weights do not fit the model: missing {missing[:3]}, unexpected {unexpected[:3]}"
            )
        if self.dtype == INT4 and head in loaded.q8:  # the logits on the int4 kernels too
            packed = prepared.get("head/hi", 3), prepared.get("head/lo", 3)
            shape = (loaded.args.vocab_size, loaded.args.hidden_size)
            if None in packed:
                pair = Int4PairLinear(loaded.q8[head], self._dtype, matvec)
                if matvec is not None:
                    prepared.put("head/hi", pair.hi)
                    prepared.put("head/lo", pair.lo)
            else:
                pair = Int4PairLinear(None, self._dtype, matvec, packed, shape)
            self.model.head_int4 = pair
        saved = prepared.save()
        if prepared.path is not None:
            self.weights_from = "prepared file" if prepared.hit else "packed"
            self.weights_from += ", then saved" if saved else ""
        self.model.init_rope(self._device)
        self.model.eval()
        kernel = decode_attention() if kernels and cpu else None
        ours = self._dtype in (torch.float32, torch.bfloat16)  # the prefill kernel's dtypes
        prefill_kernel = prefill_attention() if kernels and cpu and ours else None
        for layer in self.model.model.layers:
            layer.self_attn.kernel = kernel
            layer.self_attn.prefill_kernel = prefill_kernel
        if kernels and cpu and self._dtype == torch.bfloat16:  # bf16 and int4 models
            norm_kernel, swiglu_kernel = rms_norm(), swiglu()
            for norm in (m for m in self.model.modules() if isinstance(m, RMSNorm)):
                norm.kernel = norm_kernel
            for layer in self.model.model.layers:
                layer.mlp.swiglu = swiglu_kernel
        self._fused = None
        if fused and kernel is not None and self.dtype == INT4 and FusedDecode.fits(self.model):
            self._fused = FusedDecode(self.model, decode_layer())
        self.decode_path = "fused" if self._fused else "kernel" if kernel else "torch"
        self.prefill_path = "kernel" if prefill_kernel else "torch"
        self._kv_dtype = self._pick_kv_dtype(kernel is not None)
        self.pool = KVPool(loaded.args, self._kv_dtype, self._device)

    def _dense(self, loaded: LoadedModel, names: list[str]) -> torch.Tensor:
        """The named matrices (concatenated by rows) in the model's dtype; a quantized one is
        dequantized a slice of rows at a time (a whole vocabulary in float32 was 113 MB)."""
        quantized = getattr(loaded.weights, "quantized", {})
        if len(names) > 1 or names[0] not in quantized:
            parts = [loaded.weights[n] for n in names]
            w = parts[0] if len(parts) == 1 else np.concatenate(parts)
            return torch.tensor(w, dtype=self._dtype, device=self._device)
        qw = quantized[names[0]]
        out = torch.empty(qw.q.shape, dtype=self._dtype)
        for i in range(0, out.shape[0], PACK_ROWS):
            out[i : i + PACK_ROWS] = torch.from_numpy(qw.rows(i, i + PACK_ROWS).dequantize())
        return out.to(self._device)

    def _pick_kv_dtype(self, kernel: bool) -> torch.dtype:
        """The model's dtype on CUDA, and on a CPU with the kernel and native bf16 (half the
        bytes read per decode step); float32 on other CPUs (torch's one-query SDPA was 2-7x
        slower in bf16 there, and prefill attention over a bf16 pool is emulated without
        native bf16)."""
        if self._device.type == "cuda":
            return self._dtype
        if kernel and self._dtype == torch.bfloat16 and cpu_has_native_bf16():
            return torch.bfloat16
        return torch.float32

    def add_sequence(self, seq_id: int, capacity: int) -> None:
        self.caches[seq_id] = self.pool.add(capacity)

    def reserve_kv(self, slots: int, capacity: int) -> None:
        self.pool.reserve(slots, capacity)

    def remove_sequence(self, seq_id: int) -> None:
        cache = self.caches.pop(seq_id, None)
        if cache is not None:
            self.pool.remove(cache)

    @property
    def element_size(self) -> int:
        return torch.tensor([], dtype=self._kv_dtype).element_size()

    @torch.inference_mode()
    def prefill_batch(self, seq_ids: list[int], prompts: list[list[int]]) -> np.ndarray:
        caches = [self.caches[s] for s in seq_ids]
        for c, p in zip(caches, prompts, strict=True):
            self._check_room(c, len(p))
        offsets = [c.length for c in caches]
        lengths = [len(p) for p in prompts]
        B, L = len(prompts), max(lengths)
        tokens = torch.zeros((B, L), dtype=torch.long)
        for b, p in enumerate(prompts):
            tokens[b, : len(p)] = torch.tensor(p)
        off = torch.tensor(offsets, device=self._device).view(B, 1, 1)
        n = torch.tensor(lengths, device=self._device).view(B, 1, 1)
        i = torch.arange(L, device=self._device).view(1, L, 1)
        cold = not any(offsets)
        S = L if cold else max(o + t for o, t in zip(offsets, lengths, strict=True))
        j = torch.arange(S, device=self._device).view(1, 1, S)
        # keys: each row's cached prefix (none when cold), then its new tokens; a padding
        # query (i >= n) sees all of them, so no softmax row is empty
        allowed = (j <= off + i) & (j < off + n)
        mask = torch.zeros((B, L, S), dtype=torch.float32, device=self._device)
        mask.masked_fill_(~allowed, float("-inf"))
        self._note_mask(mask.nbytes)
        step = Step(
            # padding past a long prefix may run off the rotary table: clamp (never attended)
            positions=(off.view(B, 1) + torch.arange(L, device=self._device)).clamp_max(
                self.args.max_position_embeddings - 1
            ),
            caches=caches,
            offsets=offsets,
            lengths=lengths,
            mask=mask.unsqueeze(1).to(self._dtype if cold else self._kv_dtype),
            self_attend=cold,
        )
        del mask
        with prefill_rounding():
            h = self.model(tokens.to(self._device), step)
        last = h[
            torch.arange(B, device=self._device), torch.tensor(lengths, device=self._device) - 1
        ]
        for c, length in zip(caches, lengths, strict=True):
            c.length += length
        return self.model.logits(last).cpu().numpy()

    @torch.inference_mode()
    def prefill(self, seq_id: int, tokens: list[int]) -> np.ndarray:
        cache = self.caches[seq_id]
        self._check_room(cache, len(tokens))
        off, T = cache.length, len(tokens)
        i = torch.arange(T, device=self._device).view(T, 1)
        j = torch.arange(off + T, device=self._device).view(1, off + T)
        mask = torch.zeros((T, off + T), dtype=torch.float32, device=self._device)
        mask.masked_fill_(j > off + i, float("-inf"))
        self._note_mask(mask.nbytes)
        step = Step(
            positions=torch.arange(off, off + T, device=self._device).view(1, T),
            caches=[cache],
            offsets=[off],
            lengths=[T],
            mask=mask.view(1, 1, T, off + T).to(self._kv_dtype),
            self_attend=False,
        )
        with prefill_rounding():
            h = self.model(torch.tensor([tokens], device=self._device), step)
        cache.length += T
        return self.model.logits(h[0, -1]).cpu().numpy()

    @torch.inference_mode()
    def decode(self, seq_ids: list[int], tokens: list[int]) -> np.ndarray:
        caches = [self.caches[s] for s in seq_ids]
        for c in caches:
            self._check_room(c, 1)
        tokens_t = torch.tensor(tokens, device=self._device)
        if self._fused is not None:
            h = self._fused(tokens_t, *self.pool.decode_rows(caches), self.pool)
            for c in caches:
                c.length += 1
            return self.model.logits(h).cpu().numpy()
        view = self.pool.decode_view(caches)
        step = Step(
            positions=view.positions.view(-1, 1),
            caches=caches,
            offsets=[c.length for c in caches],
            lengths=[1] * len(caches),
            mask=None,
            self_attend=False,
            decode=view,
        )
        h = self.model(tokens_t.view(-1, 1), step)
        for c in caches:
            c.length += 1
        return self.model.logits(h[:, 0]).cpu().numpy()

    def save_prefix(self, seq_id: int, n_tokens: int) -> tuple[object, int]:
        """A copy in the model's dtype: a bfloat16 model's K/V are bfloat16 values held in a
        float32 pool, so the copy is exact at half the bytes."""
        c = self.caches[seq_id]
        k = c.k[:, :, :n_tokens].to(self._dtype, copy=True)
        v = c.v[:, :, :n_tokens].to(self._dtype, copy=True)
        return (k, v), k.nbytes + v.nbytes

    def copy_prefix(self, src_kv: object, seq_id: int, n_tokens: int) -> None:
        k, v = src_kv
        c = self.caches[seq_id]
        assert c.length == 0
        self._check_room(c, n_tokens)
        c.k[:, :, :n_tokens] = k[:, :, :n_tokens]
        c.v[:, :, :n_tokens] = v[:, :, :n_tokens]
        c.length = n_tokens

    def available_memory(self) -> int | None:
        return torch.cuda.mem_get_info(self._device)[0] if self._device.type == "cuda" else None

    def device_memory(self) -> DeviceMemory | None:
        if self._device.type != "cuda":
            return None
        return DeviceMemory(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())

    def reset_device_peak(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
