"""Read a Hugging Face model directory: config.json, *.safetensors and tokenizer.json."""

import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer as HFTokenizer

from engine.model.args import ModelArgs
from engine.model.tokenizer import Tokenizer

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """float32 arrays from a safetensors file; bfloat16 is widened here since numpy lacks it."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        dtype = np.dtype(SAFETENSORS_DTYPES[info["dtype"]])
        a = np.frombuffer(raw, dtype, (end - start) // dtype.itemsize, 8 + n + start)
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np.float32).reshape(info["shape"])
    return out


def _token_id(tok: HFTokenizer, value) -> int | None:
    if isinstance(value, dict):
        value = value.get("content")
    return tok.token_to_id(value) if isinstance(value, str) else None


def load_hf_dir(path: Path) -> tuple[ModelArgs, dict[str, np.ndarray], Tokenizer]:
    cfg = json.loads((path / "config.json").read_text())
    if cfg.get("model_type", "llama") not in ("llama", "mistral"):
        raise ValueError(f"unsupported model_type {cfg.get('model_type')!r} (llama family only)")
    args = ModelArgs.from_hf_config(cfg)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{path}: no *.safetensors files")
    weights = {}
    for f in files:
        weights.update(read_safetensors(f))
    if "lm_head.weight" not in weights and not args.tie_word_embeddings:
        raise ValueError(f"{path}: lm_head.weight missing and embeddings are not tied")

    hf_tok = HFTokenizer.from_file(str(path / "tokenizer.json"))
    tcfg_path = path / "tokenizer_config.json"
    tcfg = json.loads(tcfg_path.read_text()) if tcfg_path.exists() else {}
    eos = cfg.get("eos_token_id")
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if (tid := _token_id(hf_tok, tcfg.get("eos_token"))) is not None:
        eos_ids.add(tid)
    bos_token = tcfg.get("bos_token") or ""
    eos_token = tcfg.get("eos_token") or ""
    tokenizer = Tokenizer(
        backend=hf_tok,
        eos_ids=frozenset(eos_ids),
        bos_token=bos_token.get("content", "") if isinstance(bos_token, dict) else bos_token,
        eos_token=eos_token.get("content", "") if isinstance(eos_token, dict) else eos_token,
        chat_template=tcfg.get("chat_template"),
        add_bos=bool(tcfg.get("add_bos_token", False)),
        bos_id=_token_id(hf_tok, bos_token),
    )
    return args, weights, tokenizer
