"""Model loading: tiny, an HF directory and a GGUF file written here, and the real SmolLM2."""

import json
import subprocess
import sys
import time

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from engine.backends import load_backend
from engine.model.load import ModelNotFound, load_model
from engine.model.tiny import SPECIAL_TOKENS

from helpers.marks import needs_smollm2
from helpers.model_files import write_tiny_gguf

PROMPT = [1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 2]


def last_logits(spec: str) -> np.ndarray:
    backend = load_backend("torch", load_model(spec), dtype="float32")
    backend.add_sequence(0, 64)
    return backend.prefill(0, PROMPT)


def test_tiny_loads_fast_and_round_trips_text():
    t0 = time.perf_counter()
    m = load_model("tiny")
    assert time.perf_counter() - t0 < 1.0
    ids = m.tokenizer.encode("héllo <|im_end|>")
    assert m.tokenizer.decode(ids) == "héllo "
    assert ids[-1] == SPECIAL_TOKENS.index("<|im_end|>")
    chat = m.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}])
    assert chat.endswith("<|im_start|>assistant\n")


def test_hf_directory_loads_the_same_model(tmp_path):
    tiny = load_model("tiny")
    (tmp_path / "config.json").write_text(json.dumps(tiny.args.to_hf_config()))
    half = {k: v.astype(np.float16) for k, v in tiny.weights.items()}
    save_file(half, str(tmp_path / "model.safetensors"))
    tiny.tokenizer.backend.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": "<|im_end|>", "chat_template": tiny.tokenizer.chat_template})
    )
    loaded = load_model(str(tmp_path))
    assert loaded.args == tiny.args and loaded.tokenizer.eos_ids == {2}
    np.testing.assert_allclose(last_logits(str(tmp_path)), last_logits("tiny"), atol=0.05)


def test_gguf_file_undoes_llama_cpp_qk_permutation(tmp_path):
    tiny, a = load_model("tiny"), load_model("tiny").args
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    loaded = load_model(str(path))
    assert loaded.args.num_key_value_heads == a.num_key_value_heads
    assert loaded.tokenizer.encode("hello") == tiny.tokenizer.encode("hello")
    np.testing.assert_allclose(last_logits(str(path)), last_logits("tiny"), atol=1e-4)


@needs_smollm2
def test_the_embedded_model_answers_to_its_hub_id(monkeypatch):
    import engine.model.load as load

    monkeypatch.setattr(load, "_gguf", lambda path: (path,) * 4)  # where it reads, not the read
    assert load.load_model("HuggingFaceTB/SmolLM2-135M-Instruct") == load.load_model("smollm2-135m")


def test_unknown_model_is_a_clear_error():
    with pytest.raises(ModelNotFound, match="unknown model"):
        load_model("no-such-model")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_cli_errors_are_one_line():
    out = run_cli("generate", "--model", "no-such-model", "hi")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().startswith("Error: unknown model")


def test_cli_info_on_tiny():
    out = run_cli("info", "--model", "tiny", "--backend", "torch")
    assert out.returncode == 0 and "parameters: 90,624" in out.stdout


@pytest.mark.slow
@needs_smollm2
def test_smollm2_answers_paris_on_torch():
    out = run_cli(
        "generate",
        "--model",
        "smollm2-135m",
        "--backend",
        "torch",
        "--max-tokens",
        "24",
        "What is the capital of France?",
    )
    assert out.returncode == 0, out.stderr
    assert "Paris" in out.stdout


@pytest.mark.slow
@needs_smollm2
def test_smollm2_tokenizer_and_chat_template():
    tok = load_model("smollm2-135m").tokenizer
    assert tok.encode("Hello world 12345") == [19556, 905, 216, 33, 34, 35, 36, 37]
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert tok.encode(text)[0] == 1 and tok.eos_ids == {2}


@pytest.mark.slow
@needs_smollm2
def test_smollm2_quantized_matrices_stay_quantized_and_read_as_gguf_dequantizes_them():
    from gguf.quants import dequantize

    from engine.model.gguf_file import _unpermute
    from engine.model.load import smollm2_gguf_path
    from engine.model.weights import Weights

    loaded = load_model("smollm2-135m")
    w = loaded.weights
    assert isinstance(w, Weights)
    q_proj, embed = "model.layers.3.self_attn.q_proj.weight", "model.embed_tokens.weight"
    assert q_proj in loaded.q4 and embed in loaded.q8  # Q4_1 layers, Q8_0 tied embedding
    assert q_proj not in w.dense and embed not in w.dense and q_proj in w and embed in w
    reader = gguf.GGUFReader(str(smollm2_gguf_path()))
    tensors = {t.name: t for t in reader.tensors}
    for gguf_name, name, heads in (
        ("blk.3.attn_q.weight", q_proj, loaded.args.num_attention_heads),
        ("token_embd.weight", embed, None),
    ):
        t = tensors[gguf_name]
        want = dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
        want = _unpermute(want, heads) if heads else want
        assert np.array_equal(w[name], want)
    assert loaded.param_count == sum(np.prod(t.shape) for t in reader.tensors)
