"""The Llama architecture in PyTorch: GQA attention, RoPE (rotate_half), RMSNorm, SwiGLU.

Q/K/V and gate/up are fused into one projection each. One `Step` tells a forward where its
tokens sit and where their K/V go, so the same model serves padded batched prefill, chunked
prefill from a cached prefix, and batched decode (one attention call for the whole batch over
the shared KV pool, see kv_pool.py).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.backends.torch.kv_pool import DecodeView, KVCache
from engine.model.args import ModelArgs


@dataclass
class Step:
    positions: torch.Tensor  # [B, T] rotary positions
    caches: list[KVCache]  # one per row
    offsets: list[int]  # where each row's new tokens start in its cache
    lengths: list[int]  # valid new tokens per row (right padding beyond)
    mask: torch.Tensor | None  # additive [B, 1, T, S] mask (prefill)
    self_attend: bool  # batched prefill: attend over this step's own K/V
    decode: DecodeView | None = None  # decode: every row's K/V in the pool at once


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.kernel = None  # kernels.cpu.rms_norm(), set by the backend for bfloat16 on CPU

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel is not None:  # the same ops and rounding in one parallel call
            return self.kernel(x.reshape(-1, x.shape[-1]), self.weight, self.eps).view(x.shape)
        # Hugging Face's rounding (normalize in float32, round, then scale): F.rms_norm rounds
        # once at the end, which flipped a greedy near-tie of SmolLM2 in bfloat16
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """x*cos + rotate_half(x)*sin: rotate_half is the halves swapped (a roll by half the head)
    times the sign that sin_signed already carries (-sin, then +sin). Rounded as Hugging Face
    rounds it (no fused addcmul: rounding once flipped a greedy near-tie in bfloat16)."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin_signed


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.num_attention_heads, args.num_key_value_heads
        self.head_dim = args.head_dim
        self.qkv_proj = nn.Linear(
            args.hidden_size, (self.n_heads + 2 * self.n_kv_heads) * self.head_dim, bias=False
        )
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, args.hidden_size, bias=False)
        self.kernel = None  # kernels.cpu.decode_attention(), set by the backend on CPU
        self.prefill_kernel = None  # kernels.cpu.prefill_attention(), likewise

    def forward(self, x, cos, sin, step: Step, layer: int) -> torch.Tensor:
        B, T, _ = x.shape
        qkv = self.qkv_proj(x).view(B, T, self.n_heads + 2 * self.n_kv_heads, self.head_dim)
        qkv = qkv.transpose(1, 2)
        qk = rope(qkv[:, : self.n_heads + self.n_kv_heads], cos, sin)  # q and k at once
        q, k = qk.split([self.n_heads, self.n_kv_heads], dim=1)
        v = qkv[:, self.n_heads + self.n_kv_heads :]
        if step.decode is not None:
            out = self._attend_decode(q, k, v, step.decode, layer)
        elif step.self_attend:
            for b, cache in enumerate(step.caches):
                n = step.lengths[b]
                cache.update_and_fetch(layer, k[b, :, :n], v[b, :, :n], step.offsets[b])
            out = self._attend(q, k, v, step.mask)
        else:  # rows extend their cached prefixes (in the cache's dtype)
            keys, values = self._extend(k, v, step, layer)
            out = self._attend(q.to(keys.dtype), keys, values, step.mask).to(q.dtype)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))

    def _attend(self, q, k, v, mask) -> torch.Tensor:
        """Prefill attention under the step's additive mask: the CPU kernel (it skips the keys
        the mask hides) where it is built, else SDPA."""
        if self.prefill_kernel is not None:
            return self.prefill_kernel(q, k, v, mask, self.head_dim**-0.5)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    def _extend(self, k, v, step: Step, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write each row's new K/V after its prefix; [B, KVH, S, D] keys and values up to the
        mask's S. Every slot is a view of the pool at its full capacity, so a row's keys past
        its own end are finite leftovers that the mask hides."""
        for b, cache in enumerate(step.caches):
            n = step.lengths[b]
            cache.update_and_fetch(layer, k[b, :, :n], v[b, :, :n], step.offsets[b])
        S = step.mask.shape[-1]
        if len(step.caches) == 1:  # a view, no copy
            c = step.caches[0]
            return c.k[layer, None, :, :S], c.v[layer, None, :, :S]
        keys = torch.stack([c.k[layer, :, :S] for c in step.caches])
        return keys, torch.stack([c.v[layer, :, :S] for c in step.caches])

    def _attend_decode(self, q, k, v, d: DecodeView, layer: int) -> torch.Tensor:
        """One query per row, all rows in one attention call over the pool's slot window:
        the CPU kernel (float32 queries, the pool's float32 or bfloat16 K/V) where it is
        built, else SDPA in the pool's dtype."""
        keys, values = d.write_and_view(layer, k[:, :, 0], v[:, :, 0])  # [W, KVH, S, D]
        if self.kernel is not None:
            qw = d.to_window(q[:, :, 0]).float().contiguous()  # [W, H, D]
            out = self.kernel(qw, keys, values, d.lengths, self.head_dim**-0.5).unsqueeze(2)
        else:
            qw = d.to_window(q).to(keys.dtype)  # [W, H, 1, D]
            out = F.scaled_dot_product_attention(
                qw, keys, values, attn_mask=d.mask, enable_gqa=True
            )
        return d.from_window(out).to(q.dtype)  # [B, H, 1, D]


class MLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.gate_up_proj = nn.Linear(args.hidden_size, 2 * args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)
        self.swiglu = None  # kernels.cpu.swiglu(), set by the backend for bfloat16 on CPU

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up_proj(x)
        if self.swiglu is not None:  # the same ops and rounding in one parallel call
            act = self.swiglu(gate_up.reshape(-1, gate_up.shape[-1]))
            return self.down_proj(act.view(*gate_up.shape[:-1], -1))
        gate, up = gate_up.chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)

    def forward(self, x, cos, sin, step: Step, layer: int) -> torch.Tensor:
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, step, layer)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        # an empty weight skips Embedding's normal_ init: on meta it lazily imports torch._refs,
        # 1 s of every cold start (the loaded weight replaces it anyway)
        empty = torch.empty(args.vocab_size, args.hidden_size)
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size, _weight=empty)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.num_hidden_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)


FUSED = {  # fused projection -> the HF projections it concatenates (output rows)
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
}


def fuse_names(names) -> dict[str, list[str]]:
    """HF weight names grouped by the parameter they load into (fused ones concatenated)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        target = name
        for fused, parts in FUSED.items():
            for part in parts:
                if f".{part}." in name:
                    target = name.replace(part, fused)
                    groups.setdefault(target, [None] * len(parts))[parts.index(part)] = name
        if target == name:
            groups[name] = [name]
    return groups


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model = LlamaModel(args)
        self.head_int4 = None  # a Q8_0 head on the int4 kernels (int4.Int4PairLinear)
        if not args.tie_word_embeddings:
            self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def init_rope(self, device: torch.device) -> None:
        """cos/sin tables for every position (plain attributes: built after weight loading)."""
        a = self.args
        inv_freq = 1.0 / a.rope_theta ** (
            torch.arange(0, a.head_dim, 2, dtype=torch.float64) / a.head_dim
        )
        freqs = torch.outer(torch.arange(a.max_position_embeddings, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        half = a.head_dim // 2
        sign = torch.cat((-torch.ones(half), torch.ones(half))).double()
        self.cos_table = emb.cos().float().to(device)
        self.sin_table = (emb.sin() * sign).float().to(device)  # signed for rope()

    def forward(self, tokens: torch.Tensor, step: Step) -> torch.Tensor:
        """Hidden states [B, T, D] after the final norm."""
        h = self.model.embed_tokens(tokens)
        cos = self.cos_table[step.positions].to(h.dtype).unsqueeze(1)
        sin = self.sin_table[step.positions].to(h.dtype).unsqueeze(1)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, step, i)
        return self.model.norm(h)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.head_int4 is not None:
            return self.head_int4(h)
        head = self.model.embed_tokens if self.args.tie_word_embeddings else self.lm_head
        return F.linear(h, head.weight).float()
