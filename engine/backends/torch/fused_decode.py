"""FusedDecode: an int4 model's decode step with each Llama block in one C++ call.

cpu_block.cpp's decode_layer runs a TransformerBlock for the step's rows (RMSNorm, the int4
QKV projection, RoPE, the KV pool write, attention, o_proj, the residual, RMSNorm, SwiGLU) in
the model's activations, rounding to bfloat16 where torch/llama.py's ops round (or float32
throughout); the embedding, the final norm and the logits stay in torch. On the int4 path the
~1,800 small torch ops of a step cost more than its matmuls (docs/performance.md).
"""

import torch

from engine.backends.torch.int4 import DENSE_ROWS, Int4Linear
from engine.backends.torch.kv_pool import KVPool
from engine.backends.torch.llama import Model


def _projection(linear: Int4Linear) -> list[torch.Tensor]:
    """{codes, d, m} on our int4 kernel (codes 4-d), {packed, scales_and_zeros, dense} on
    torch's."""
    return [*linear.packed] if linear.dense is None else [*linear.packed, linear.dense]


class FusedDecode:
    def __init__(self, model: Model, decode_layer):
        self.model, self.decode_layer = model, decode_layer
        self.layers = [
            (
                block.input_layernorm.weight,
                block.post_attention_layernorm.weight,
                _projection(block.self_attn.qkv_proj),
                _projection(block.self_attn.o_proj),
                _projection(block.mlp.gate_up_proj),
                _projection(block.mlp.down_proj),
            )
            for block in model.model.layers
        ]

    @staticmethod
    def fits(model: Model) -> bool:
        """Every projection on an int4 kernel and every norm weight in bfloat16, or in float32
        with every projection on our float32 kernel (no dense copy: weight_t rebuilds it)."""
        for block in model.model.layers:
            linears = (
                block.self_attn.qkv_proj,
                block.self_attn.o_proj,
                block.mlp.gate_up_proj,
                block.mlp.down_proj,
            )
            if not all(isinstance(m, Int4Linear) and m.packed is not None for m in linears):
                return False
            dtype = block.input_layernorm.weight.dtype
            if dtype == torch.float32 and any(m.dense is not None for m in linears):
                return False
            if dtype not in (torch.bfloat16, torch.float32):
                return False
        return True

    def __call__(
        self, tokens: torch.Tensor, slots: torch.Tensor, positions: torch.Tensor, pool: KVPool
    ) -> torch.Tensor:
        """Hidden states [B, D] after the final norm; each row's K/V written at its position."""
        m, a = self.model, self.model.args
        h = m.model.embed_tokens(tokens)
        cos = m.cos_table[positions].to(h.dtype)
        sin = m.sin_table[positions].to(h.dtype)
        for i, (norm1, norm2, qkv, o, gate_up, down) in enumerate(self.layers):
            h = self.decode_layer(
                h, norm1, norm2, qkv, o, gate_up, down, pool.k[i], pool.v[i], slots, positions,
                cos, sin, a.num_attention_heads, a.num_key_value_heads, a.rms_norm_eps, DENSE_ROWS,
            )  # fmt: skip
        return m.model.norm(h)
