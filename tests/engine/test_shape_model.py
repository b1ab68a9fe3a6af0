"""scripts/shape_model.py, the GPU check's stand-in for SmolLM2: its files give SmolLM2's shape,
tokenizer and chat template, and its weights load as engine/model/tiny.py's in bfloat16."""

import json
import subprocess
import sys

import numpy as np

from engine.model.hf_dir import load_hf_dir
from engine.model.load import load_model
from engine.model.tiny import TINY_ARGS, tiny_tokenizer, tiny_weights

from helpers import REPO
from helpers.marks import needs_smollm2

SCRIPT = str(REPO / "scripts" / "shape_model.py")


def test_its_weights_are_the_seeded_ones_in_bfloat16(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_ARGS.to_hf_config()))
    tiny_tokenizer().backend.save(str(tmp_path / "tokenizer.json"))
    subprocess.run([sys.executable, SCRIPT, "weights", str(tmp_path), "--seed", "3"], check=True)
    args, weights, _ = load_hf_dir(tmp_path)
    assert args == TINY_ARGS
    expected = tiny_weights(TINY_ARGS, 3)
    assert weights.keys() == expected.keys()
    for name, w in expected.items():
        top_half = (w.view(np.uint32) & 0xFFFF0000).view(np.float32)
        np.testing.assert_array_equal(weights[name], top_half, err_msg=name)


@needs_smollm2
def test_its_files_are_smollm2s_shape_tokenizer_and_template(tmp_path):
    subprocess.run([sys.executable, SCRIPT, "files", str(tmp_path)], check=True)
    head = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (tmp_path / "x.safetensors").write_bytes(len(head).to_bytes(8, "little") + head + bytes(4))
    args, _, tok = load_hf_dir(tmp_path)  # the shape and tokenizer; one stand-in tensor
    real = load_model("smollm2-135m")
    assert args == real.args
    text = "Hello, world! 12345 <|im_start|>user\nnaïve café<|im_end|>"
    assert tok.encode(text) == real.tokenizer.encode(text)
    same = ("eos_ids", "bos_id", "add_bos", "bos_token", "eos_token")
    assert [getattr(tok, a) for a in same] == [getattr(real.tokenizer, a) for a in same]
    chat = [{"role": "user", "content": "Why is the sky blue?"}]
    assert tok.apply_chat_template(chat) == real.tokenizer.apply_chat_template(chat)
