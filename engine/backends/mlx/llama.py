"""The Llama architecture in MLX: GQA attention, RoPE (rotate_half), RMSNorm, SwiGLU.

It reads line by line like torch/llama.py: one `Step` tells a forward where its tokens sit and
where their K/V go, so the same model serves padded batched prefill, chunked prefill from a
cached prefix, and batched decode.
"""

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from engine.model.args import ModelArgs


class KVCache:
    """K and V of one sequence for every layer, preallocated to its capacity in tokens."""

    def __init__(self, args: ModelArgs, capacity: int, dtype: mx.Dtype):
        shape = (args.num_key_value_heads, capacity, args.head_dim)
        self.k = [mx.zeros(shape, dtype) for _ in range(args.num_hidden_layers)]
        self.v = [mx.zeros(shape, dtype) for _ in range(args.num_hidden_layers)]
        self.capacity = capacity
        self.length = 0  # tokens written, advanced by the backend after each forward

    def update_and_fetch(self, layer: int, k: mx.array, v: mx.array, offset: int):
        """Store k, v ([KVH, T, D]) at offset; return the layer's K, V up to offset + T."""
        end = offset + k.shape[1]
        self.k[layer][:, offset:end] = k
        self.v[layer][:, offset:end] = v
        return self.k[layer][:, :end], self.v[layer][:, :end]

    @property
    def state(self) -> list[mx.array]:
        return self.k + self.v

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.state)


@dataclass
class Step:
    positions: mx.array  # [B, T] rotary positions
    caches: list[KVCache]  # one per row
    offsets: list[int]  # where each row's new tokens start in its cache
    lengths: list[int]  # valid new tokens per row (right padding beyond)
    mask: mx.array  # additive [B, 1, T, S]: S keys, each row's cache from position 0
    self_attend: bool  # cold batched prefill: attend over this step's own K/V, not the caches


def _padded(a: mx.array, S: int) -> mx.array:
    """A cache layer's first S positions ([KVH, S, D]), zero-padded past its capacity; the
    mask hides every position past the row's length."""
    a = a[:, :S]
    return a if a.shape[1] == S else mx.pad(a, [(0, 0), (0, S - a.shape[1]), (0, 0)])


def rotate_half(x: mx.array) -> mx.array:
    x1, x2 = mx.split(x, 2, axis=-1)
    return mx.concatenate([-x2, x1], axis=-1)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.num_attention_heads, args.num_key_value_heads
        self.head_dim = args.head_dim
        self.scale = self.head_dim**-0.5
        self.q_proj = nn.Linear(args.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(args.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, args.hidden_size, bias=False)

    def __call__(self, x, cos, sin, step: Step, layer: int) -> mx.array:
        B, T, _ = x.shape
        q = self.q_proj(x).reshape(B, T, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(B, T, self.n_kv_heads, self.head_dim).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(B, T, self.n_kv_heads, self.head_dim).transpose(0, 2, 1, 3)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        for b, cache in enumerate(step.caches):
            n = step.lengths[b]
            cache.update_and_fetch(layer, k[b, :, :n], v[b, :, :n], step.offsets[b])
        if not step.self_attend:  # attend over each row's cache instead, in one call
            S = step.mask.shape[-1]
            k = mx.stack([_padded(c.k[layer], S) for c in step.caches])
            v = mx.stack([_padded(c.v[layer], S) for c in step.caches])
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale, mask=step.mask)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.gate_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.up_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = nn.RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(args.hidden_size, args.rms_norm_eps)

    def __call__(self, x, cos, sin, step: Step, layer: int) -> mx.array:
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, step, layer)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [TransformerBlock(args) for _ in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, args.rms_norm_eps)


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model = LlamaModel(args)
        if not args.tie_word_embeddings:
            self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def init_rope(self) -> None:
        """cos/sin tables for every position, computed as torch/llama.py does (float64, then
        float32) so both backends rotate identically; `_` keeps them out of the parameters."""
        a = self.args
        inv_freq = 1.0 / a.rope_theta ** (
            np.arange(0, a.head_dim, 2, dtype=np.float64) / a.head_dim
        )
        freqs = np.outer(np.arange(a.max_position_embeddings, dtype=np.float64), inv_freq)
        emb = np.concatenate((freqs, freqs), axis=-1)
        self._cos_table = mx.array(np.cos(emb).astype(np.float32))
        self._sin_table = mx.array(np.sin(emb).astype(np.float32))

    def __call__(self, tokens: mx.array, step: Step) -> mx.array:
        """Hidden states [B, T, D] after the final norm."""
        h = self.model.embed_tokens(tokens)
        cos = self._cos_table[step.positions].astype(h.dtype)[:, None]
        sin = self._sin_table[step.positions].astype(h.dtype)[:, None]
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, step, i)
        return self.model.norm(h)

    def logits(self, h: mx.array) -> mx.array:
        if self.args.tie_word_embeddings:
            return self.model.embed_tokens.as_linear(h).astype(mx.float32)
        return self.lm_head(h).astype(mx.float32)

    def make_cache(self, capacity: int) -> KVCache:
        return KVCache(self.args, capacity, self.model.embed_tokens.weight.dtype)
