"""`tiny`: a seeded random-init llama with a byte-level tokenizer; loads in milliseconds.

Its per-step cost is dominated by fixed overhead, like a small model on an accelerator, so
batching matters for it just as it does for a real model on a GPU.
"""

import numpy as np
from tokenizers import AddedToken, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from engine.model.args import ModelArgs
from engine.model.tokenizer import CHATML_TEMPLATE, Tokenizer

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TINY_ARGS = ModelArgs(
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=256 + len(SPECIAL_TOKENS),
    rope_theta=10000.0,
    max_position_embeddings=16384,
    tie_word_embeddings=True,
)


def tiny_tokenizer() -> Tokenizer:
    """One token per byte (no merges) plus ChatML's control tokens."""
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = HFTokenizer(models.BPE(vocab, []))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return Tokenizer(
        backend=tok,
        eos_ids=frozenset({2}),
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        chat_template=CHATML_TEMPLATE,
    )


def tiny_weights(args: ModelArgs = TINY_ARGS, seed: int = 0) -> dict[str, np.ndarray]:
    """HF-named float32 weights; unit-scale embeddings keep greedy choices far from ties."""
    rng = np.random.default_rng(seed)

    def dense(out: int, inp: int) -> np.ndarray:
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    d, kv = args.hidden_size, args.num_key_value_heads * args.head_dim
    w = {"model.embed_tokens.weight": rng.standard_normal((args.vocab_size, d)).astype(np.float32)}
    for i in range(args.num_hidden_layers):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = dense(args.num_attention_heads * args.head_dim, d)
        w[p + "self_attn.k_proj.weight"] = dense(kv, d)
        w[p + "self_attn.v_proj.weight"] = dense(kv, d)
        w[p + "self_attn.o_proj.weight"] = dense(d, args.num_attention_heads * args.head_dim)
        w[p + "mlp.gate_proj.weight"] = dense(args.intermediate_size, d)
        w[p + "mlp.up_proj.weight"] = dense(args.intermediate_size, d)
        w[p + "mlp.down_proj.weight"] = dense(d, args.intermediate_size)
        w[p + "input_layernorm.weight"] = np.ones(d, np.float32)
        w[p + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
    w["model.norm.weight"] = np.ones(d, np.float32)
    return w
