"""Model files written for tests: tiny as a GGUF, as llama.cpp's converter writes one, its
projections optionally in Q4_1 and its tied embedding in Q8_0 as SmolLM2's GGUF stores them;
and tiny quantized the same way in memory (quantized_tiny)."""

import dataclasses
from pathlib import Path

import gguf
import numpy as np

from engine.model.load import load_model
from engine.model.tiny import SPECIAL_TOKENS

PARTS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter (convert_hf_to_gguf.py: LlamaModel.permute)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_tiny_gguf(path: Path, quantized: bool = False) -> Path:
    tiny = load_model("tiny")
    a = tiny.args
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(a.num_hidden_layers)
    w.add_context_length(a.max_position_embeddings)
    w.add_embedding_length(a.hidden_size)
    w.add_feed_forward_length(a.intermediate_size)
    w.add_head_count(a.num_attention_heads)
    w.add_head_count_kv(a.num_key_value_heads)
    w.add_rope_freq_base(a.rope_theta)
    w.add_layer_norm_rms_eps(a.rms_norm_eps)
    vocab = tiny.tokenizer.backend.get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.get)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIAL_TOKENS else 1 for t in tokens])
    w.add_token_merges([])
    w.add_eos_token_id(2)
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
    }
    for name, t in tiny.weights.items():
        if name not in names:
            layer, rest = name.split(".")[2], ".".join(name.split(".")[3:-1])
            names[name] = f"blk.{layer}.{PARTS[rest]}.weight"
        if name.endswith("q_proj.weight"):
            t = permute(t, a.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            t = permute(t, a.num_key_value_heads)
        kind = None
        if quantized and name.endswith("_proj.weight"):
            kind = gguf.GGMLQuantizationType.Q4_1
        elif quantized and name == "model.embed_tokens.weight":
            kind = gguf.GGMLQuantizationType.Q8_0
        if kind is None:
            w.add_tensor(names[name], t)
        else:
            w.add_tensor(names[name], gguf.quants.quantize(t, kind), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def quantized_tiny():
    """tiny with every projection rounded to Q4_1 and its (tied) embedding to Q8_0, as
    SmolLM2's GGUF stores them: the dequantized floats and the codes."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    from engine.model.q4 import quantize_q4_1
    from engine.model.q8 import from_q8_0_blocks

    loaded = load_model("tiny")
    q4 = {n: quantize_q4_1(w) for n, w in loaded.weights.items() if n.endswith("_proj.weight")}
    embed = "model.embed_tokens.weight"
    w = loaded.weights[embed]
    q8 = {embed: from_q8_0_blocks(quantize(w, GGMLQuantizationType.Q8_0), *w.shape)}
    weights = {**loaded.weights, **{n: q.dequantize() for n, q in {**q4, **q8}.items()}}
    return dataclasses.replace(loaded, weights=weights, q4=q4, q8=q8)
