"""Read a llama-architecture GGUF: hyperparameters, weights and the tokenizer."""

from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from engine.model.args import ModelArgs
from engine.model.gguf_reader import GGUFFile, TensorInfo, dequantize
from engine.model.q4 import Q4Weight, from_q4_1_blocks
from engine.model.q8 import Q8Weight, from_q8_0_blocks
from engine.model.tokenizer import Tokenizer
from engine.model.weights import LazyMap, Weights

TENSOR_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
BLOCK_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
CONTROL_TOKEN_TYPE = 3
# llama.cpp's "smollm" pre-tokenizer: single digits, then GPT-2 byte-level splitting.
PRE_TOKENIZERS = {
    "smollm": [pre_tokenizers.Digits(individual_digits=True)],
    "llama-bpe": [
        pre_tokenizers.Split(
            Regex(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"),
            behavior="isolated",
        )
    ],
}


def _field(reader: GGUFFile, key: str, default=None):
    return reader.fields.get(key, default)


def _hf_name(gguf_name: str) -> str:
    if gguf_name in TENSOR_NAMES:
        return TENSOR_NAMES[gguf_name]
    _, layer, part, kind = gguf_name.split(".")
    return f"model.layers.{layer}.{BLOCK_NAMES[part]}.{kind}"


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation (interleaved RoPE pairs -> HF rotate_half halves)."""
    out, inp = w.shape
    return w.reshape(n_head, out // n_head // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


def read_args(reader: GGUFFile) -> ModelArgs:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"unsupported GGUF architecture {arch!r} (only 'llama')")
    heads = _field(reader, "llama.attention.head_count")
    vocab = len(reader.fields["tokenizer.ggml.tokens"])
    return ModelArgs(
        hidden_size=_field(reader, "llama.embedding_length"),
        num_hidden_layers=_field(reader, "llama.block_count"),
        intermediate_size=_field(reader, "llama.feed_forward_length"),
        num_attention_heads=heads,
        num_key_value_heads=_field(reader, "llama.attention.head_count_kv", heads),
        vocab_size=_field(reader, "llama.vocab_size", vocab),
        rms_norm_eps=_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5),
        rope_theta=_field(reader, "llama.rope.freq_base", 10000.0),
        max_position_embeddings=_field(reader, "llama.context_length", 2048),
        tie_word_embeddings="output.weight" not in {t.name for t in reader.tensors},
    )


def _q4(t: TensorInfo, shape: list[int], heads: int | None) -> Q4Weight:
    qw = from_q4_1_blocks(t.data, *shape)
    if heads:
        qw = qw.permute_rows(_unpermute(np.arange(shape[0])[:, None], heads)[:, 0])
    return qw


def read_weights(
    reader: GGUFFile, args: ModelArgs
) -> tuple[Weights, Mapping[str, Q4Weight], Mapping[str, Q8Weight]]:
    """The weights by HF name, and the Q4_1 and Q8_0 matrices as stored (Q8_0 only where no
    row permutation applies: SmolLM2's tied embedding). Quantized matrices are decoded when
    read, one at a time, from the file's map: a backend that packs them holds one unpacked."""
    dense, q4, q8, count = {}, {}, {}, 0
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]  # GGML [in, out] -> (out, in)
        count += int(np.prod(shape))
        heads = None
        if t.name.endswith("attn_q.weight"):
            heads = args.num_attention_heads
        elif t.name.endswith("attn_k.weight"):
            heads = args.num_key_value_heads
        name = _hf_name(t.name)
        if t.type_name == "Q4_1" and len(shape) == 2:
            q4[name] = partial(_q4, t, shape, heads)
        elif t.type_name == "Q8_0" and len(shape) == 2 and not heads:
            q8[name] = partial(from_q8_0_blocks, t.data, *shape)
        else:
            w = dequantize(t)
            dense[name] = _unpermute(w, heads) if heads else w
    return Weights(dense, LazyMap({**q4, **q8}), count), LazyMap(q4), LazyMap(q8)


def read_tokenizer(reader: GGUFFile) -> Tokenizer:
    model = _field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"unsupported GGUF tokenizer {model!r} (only GPT-2-style BPE)")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges") or []]
    bpe = HFTokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    pre = PRE_TOKENIZERS.get(_field(reader, "tokenizer.ggml.pre", ""), [])
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not pre)
    bpe.pre_tokenizer = pre_tokenizers.Sequence([*pre, byte_level])
    bpe.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(tokens, types, strict=True) if ty == CONTROL_TOKEN_TYPE]
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    bos = _field(reader, "tokenizer.ggml.bos_token_id")
    eos = _field(reader, "tokenizer.ggml.eos_token_id")
    eos_ids = {eos} if eos is not None else set()
    eot = _field(reader, "tokenizer.ggml.eot_token_id")
    if eot is not None:
        eos_ids.add(eot)
    return Tokenizer(
        backend=bpe,
        eos_ids=frozenset(eos_ids),
        bos_token=tokens[bos] if bos is not None else "",
        eos_token=tokens[eos] if eos is not None else "",
        chat_template=_field(reader, "tokenizer.chat_template"),
        add_bos=bool(_field(reader, "tokenizer.ggml.add_bos_token", False)),
        bos_id=bos,
    )


def load_gguf(
    path: Path,
) -> tuple[ModelArgs, Weights, Tokenizer, Mapping[str, Q4Weight], Mapping[str, Q8Weight], GGUFFile]:
    reader = GGUFFile(path)
    args = read_args(reader)
    weights, q4, q8 = read_weights(reader, args)
    return args, weights, read_tokenizer(reader), q4, q8, reader
