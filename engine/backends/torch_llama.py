"""The Llama architecture in PyTorch: GQA attention, RoPE (rotate_half), RMSNorm, SwiGLU.

One `Step` tells a forward where its tokens sit and where their K/V go, so the same model
serves padded batched prefill, chunked prefill from a cached prefix, and batched decode.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs


class KVCache:
    """K and V of one sequence for every layer, preallocated to its capacity in tokens."""

    def __init__(self, args: ModelArgs, capacity: int, dtype: torch.dtype, device: torch.device):
        shape = (args.num_hidden_layers, args.num_key_value_heads, capacity, args.head_dim)
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.capacity = capacity
        self.length = 0  # tokens written, advanced by the backend after each forward

    def update_and_fetch(self, layer: int, k: torch.Tensor, v: torch.Tensor, offset: int):
        """Store k, v ([KVH, T, D]) at offset; return the layer's K, V up to offset + T."""
        end = offset + k.shape[1]
        self.k[layer, :, offset:end] = k
        self.v[layer, :, offset:end] = v
        return self.k[layer, :, :end], self.v[layer, :, :end]

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


@dataclass
class Step:
    positions: torch.Tensor  # [B, T] rotary positions
    caches: list[KVCache]  # one per row
    offsets: list[int]  # where each row's new tokens start in its cache
    lengths: list[int]  # valid new tokens per row (right padding beyond)
    mask: torch.Tensor | None  # additive [B, 1, T, S] mask, or None for decode
    self_attend: bool  # batched prefill: attend over this step's own K/V


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.num_attention_heads, args.num_key_value_heads
        self.head_dim = args.head_dim
        self.q_proj = nn.Linear(args.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(args.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, args.hidden_size, bias=False)

    def forward(self, x, cos, sin, step: Step, layer: int) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if step.self_attend:
            for b, cache in enumerate(step.caches):
                n = step.lengths[b]
                cache.update_and_fetch(layer, k[b, :, :n], v[b, :, :n], step.offsets[b])
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=step.mask, enable_gqa=True)
        else:
            out = torch.cat(
                [self._attend_cached(q[b : b + 1], k[b], v[b], step, layer, b) for b in range(B)]
            )
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))

    def _attend_cached(self, q, k, v, step: Step, layer: int, b: int) -> torch.Tensor:
        keys, values = step.caches[b].update_and_fetch(layer, k, v, step.offsets[b])
        if q.shape[2] > 1:
            mask = step.mask[b : b + 1] if step.mask is not None else None
            return F.scaled_dot_product_attention(
                q, keys[None], values[None], attn_mask=mask, enable_gqa=True
            )
        # One query token: a grouped matmul beats SDPA's dispatch for decode.
        g = self.n_heads // self.n_kv_heads
        qg = q.view(self.n_kv_heads, g, self.head_dim) * self.head_dim**-0.5
        scores = torch.softmax((qg @ keys.transpose(1, 2)).float(), dim=-1).to(q.dtype)
        return (scores @ values).view(1, self.n_heads, 1, self.head_dim)


class MLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.gate_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.up_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


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
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.num_hidden_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model = LlamaModel(args)
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
        self.cos_table = emb.cos().float().to(device)
        self.sin_table = emb.sin().float().to(device)

    def forward(self, tokens: torch.Tensor, step: Step) -> torch.Tensor:
        """Hidden states [B, T, D] after the final norm."""
        h = self.model.embed_tokens(tokens)
        cos = self.cos_table[step.positions].to(h.dtype).unsqueeze(1)
        sin = self.sin_table[step.positions].to(h.dtype).unsqueeze(1)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, step, i)
        return self.model.norm(h)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        head = self.model.embed_tokens if self.args.tie_word_embeddings else self.lm_head
        return F.linear(h, head.weight).float()

    def make_cache(self, capacity: int) -> KVCache:
        w = self.model.embed_tokens.weight
        return KVCache(self.args, capacity, w.dtype, w.device)
