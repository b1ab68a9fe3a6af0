"""Loading without a transient: our GGUF reader against the gguf package's, prepared int4
weights saved once and mapped after (the same logits either way), and the memory a load
holds at its peak against what it keeps."""

import json
import os
import subprocess
import sys

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize

from engine.backends import load_backend
from engine.backends.torch.int4 import int4_kernels_available
from engine.model.gguf_reader import GGUFFile, dequantize
from engine.model.load import load_model, smollm2_gguf_path

from helpers.marks import needs_smollm2
from helpers.model_files import write_tiny_gguf


def assert_same_file(path) -> None:
    ours, theirs = GGUFFile(path), gguf.GGUFReader(str(path))
    fields = {k: f.contents() for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
    assert ours.fields.keys() == fields.keys()
    for key, value in fields.items():
        assert ours.fields[key] == (pytest.approx(value) if isinstance(value, float) else value)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for o, t in zip(ours.tensors, theirs.tensors, strict=True):
        assert o.shape == tuple(int(d) for d in t.shape) and o.type_name == t.tensor_type.name
        assert np.array_equal(dequantize(o), gguf_dequantize(t.data, t.tensor_type).reshape(
            [int(d) for d in reversed(t.shape)]
        ))  # fmt: skip


def test_reader_reads_every_field_type_and_tensor_type_as_the_gguf_package(tmp_path):
    path = tmp_path / "kinds.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint8("k.u8", 7)
    w.add_int32("k.i32", -5)
    w.add_uint64("k.u64", 2**40)
    w.add_float32("k.f32", 0.25)
    w.add_float64("k.f64", 1e-9)
    w.add_bool("k.bool", True)
    w.add_string("k.str", "héllo")
    w.add_array("k.ints", [1, -2, 3])
    w.add_array("k.strs", ["a", "bc", ""])
    rng = np.random.default_rng(0)
    m = rng.standard_normal((64, 64)).astype(np.float32)
    w.add_tensor("f32", m)
    w.add_tensor("f16", m.astype(np.float16))
    for kind in ("Q4_0", "Q4_1", "Q8_0", "Q5_0"):  # Q5_0: a type only the gguf package decodes
        t = gguf.GGMLQuantizationType[kind]
        w.add_tensor(kind.lower(), quantize(m, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert_same_file(path)


@needs_smollm2
def test_reader_reads_smollm2_as_the_gguf_package():
    assert_same_file(smollm2_gguf_path())


int4 = pytest.mark.skipif(not int4_kernels_available(), reason="torch has no CPU int4 kernels")


def logits(backend) -> np.ndarray:
    backend.add_sequence(0, 64)
    first = backend.prefill(0, [1, 72, 101, 108, 108, 111])
    return np.stack([first, backend.decode([0], [int(first.argmax())])[0]])


@int4
def test_prepared_weights_are_saved_once_mapped_after_and_serve_the_same_logits(
    tmp_path, monkeypatch
):
    path = write_tiny_gguf(tmp_path / "tiny-q.gguf", quantized=True)
    monkeypatch.setenv("SERVEGATE_WEIGHTS_CACHE", str(tmp_path / "cache"))
    first = load_backend("torch", load_model(str(path)), dtype="int4")
    if first.weights_from == "model file":
        pytest.skip("our int4 kernels are not built here: nothing is prepared")
    assert first.weights_from == "packed, then saved"
    (saved,) = (tmp_path / "cache").glob("tiny-q-*.pt")
    second = load_backend("torch", load_model(str(path)), dtype="int4")
    assert second.weights_from == "prepared file"
    want = logits(first)
    assert np.array_equal(logits(second), want)
    saved.write_bytes(b"torn")  # a file cut short: packed again, replaced
    third = load_backend("torch", load_model(str(path)), dtype="int4")
    assert third.weights_from == "packed, then saved" and np.array_equal(logits(third), want)
    assert load_backend("torch", load_model(str(path)), dtype="int4").weights_from == (
        "prepared file"
    )
    stale, fresh = tmp_path / "cache" / "gone-0.pt", tmp_path / "cache" / "kept-0.pt"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (0, 0))  # untouched since 1970: removed by the next save
    path.touch()  # the GGUF changed (its mtime): a new name, packed again
    assert load_backend("torch", load_model(str(path)), dtype="int4").weights_from == (
        "packed, then saved"
    )
    assert not stale.exists() and fresh.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SERVEGATE_WEIGHTS_CACHE", str(blocker / "cache"))  # cannot be made
    fourth = load_backend("torch", load_model(str(path)), dtype="int4")
    assert fourth.weights_from == "packed" and np.array_equal(logits(fourth), want)
    monkeypatch.setenv("SERVEGATE_WEIGHTS_CACHE", "0")
    assert load_backend("torch", load_model(str(path)), dtype="int4").weights_from == "model file"


LOAD = """
import json, sys
from engine.memory import release_freed_memory
def status(key):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key)) * 1024
import torch, engine.server
before = status("VmRSS")
from engine.backends import load_backend
from engine.model.load import load_model
loaded = load_model("smollm2-135m")
backend = load_backend("torch", loaded)
loaded.drop_weights()
release_freed_memory()
print(json.dumps({"before": before, "peak": status("VmHWM"), "after": status("VmRSS"),
                  "weights_from": backend.weights_from}))
"""


@needs_smollm2
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc VmHWM")
def test_loading_smollm2_peaks_near_what_it_keeps(tmp_path):
    """The load's high-water mark over what it holds after: ~540 MiB when the gguf package's
    reader and whole-matrix dequantizing and packing ran (docs/changelog.md); now the file is
    read one matrix at a time, and with the prepared file nothing is packed at all."""

    def load() -> dict:
        env = {**os.environ, "SERVEGATE_WEIGHTS_CACHE": str(tmp_path)}
        out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True,
                             check=True, env=env, timeout=300)  # fmt: skip
        return json.loads(out.stdout)

    packed, mapped = load(), load()
    mib = 2**20
    print({k: {m: v / mib if isinstance(v, int) else v for m, v in r.items()}
           for k, r in (("packed", packed), ("mapped", mapped))})  # fmt: skip
    if packed["weights_from"] == "model file":
        pytest.skip("our int4 kernels are not built here")
    assert packed["weights_from"] == "packed, then saved"
    assert mapped["weights_from"] == "prepared file"
    assert packed["peak"] - packed["after"] < 192 * mib, packed
    assert mapped["peak"] - mapped["after"] < 48 * mib, mapped
    assert mapped["after"] - mapped["before"] < packed["after"] - packed["before"]
