"""Parity of the forwards: batched vs single prefill, chunked vs whole, torch vs MLX, the KV
pool's batched decode vs per-row, int4 vs the dequantized float path, prompt-cache hits
prefilled in one batched forward vs cold runs."""

import importlib
import shutil

import numpy as np
import pytest
import torch

from engine.backends import load_backend
from engine.backends.kernels import cpu as cpu_kernels
from engine.backends.kernels.cpu_features import cpu_has_native_bf16
from engine.backends.torch.backend import TorchBackend
from engine.backends.torch.int4 import Int4Linear, Int4PairLinear, int4_kernels_available
from engine.model.load import load_model

from helpers.model_files import quantized_tiny


def mlx_import_error() -> str | None:
    try:
        importlib.import_module("mlx.core")
    except ImportError as e:
        return str(e)
    return None


COMPILER = shutil.which("c++") is not None  # then the CPU decode attention kernel must build
MLX_ERROR = mlx_import_error()
NO_MLX = pytest.mark.skipif(
    MLX_ERROR is not None, reason=f"mlx.core cannot be imported: {MLX_ERROR}"
)
BACKENDS = ["torch", "torch-sdpa", pytest.param("mlx", marks=NO_MLX)]  # torch: our kernel
LENGTHS = (5, 17, 33, 64)
DECODE_STEPS = 16
# float32 logits of the same math in another order or library: max |diff| must stay under this
# fraction of the largest |logit|. Measured on tiny: <= 3.3e-7 (torch batched vs single, chunked
# vs whole, and torch vs MLX alike); a masking, offset or RoPE bug moves logits by far more.
REL_TOL = 1e-5
# smollm2's 30 layers accumulate more: measured 2.8e-6 torch vs MLX.
SMOLLM2_REL_TOL = 1e-4


def close(a: np.ndarray, b: np.ndarray, rel_tol: float = REL_TOL) -> bool:
    return float(np.abs(a - b).max()) <= rel_tol * float(np.abs(a).max())


def prompts(lengths=LENGTHS, seed: int = 1) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(3, 259, n)] for n in lengths]


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request, tiny):
    if request.param == "torch-sdpa":  # decode attention on torch's SDPA, not our kernel
        return TorchBackend(tiny, dtype="float32", kernels=False)
    be = load_backend(request.param, tiny, dtype="float32")
    if request.param == "torch" and COMPILER:
        assert (be.decode_path, be.prefill_path) == ("kernel", "kernel")  # the kernels built
    return be


def run_single(be, prompt: list[int], steps: int, chunk: int | None = None, seq_id: int = 99):
    """Greedy tokens and per-step logits of one sequence: (chunked) prefill, then decode."""
    be.add_sequence(seq_id, len(prompt) + steps)
    try:
        chunk = chunk or len(prompt)
        for start in range(0, len(prompt), chunk):
            logits = be.prefill(seq_id, prompt[start : start + chunk])
        out = [logits]
        for _ in range(steps):
            out.append(be.decode([seq_id], [int(out[-1].argmax())])[0])
        return [int(x.argmax()) for x in out], np.stack(out)
    finally:
        be.remove_sequence(seq_id)


def run_batched(be, batch: list[list[int]], steps: int):
    """The same, for all prompts at once: ONE padded prefill, then batched decode. Logits are
    [steps + 1, B, V]."""
    ids = list(range(len(batch)))
    for i, p in zip(ids, batch, strict=True):
        be.add_sequence(i, len(p) + steps)
    try:
        out = [be.prefill_batch(ids, batch)]
        for _ in range(steps):
            out.append(be.decode(ids, [int(t) for t in out[-1].argmax(-1)]))
        assert [be.seq_length(i) for i in ids] == [len(p) + steps for p in batch]
        return np.stack(out)
    finally:
        for i in ids:
            be.remove_sequence(i)


def test_batched_prefill_and_decode_match_single(backend):
    batch = prompts()
    logits = run_batched(backend, batch, DECODE_STEPS)
    for b, p in enumerate(batch):
        tokens, single = run_single(backend, p, DECODE_STEPS)
        assert [int(x.argmax()) for x in logits[:, b]] == tokens, f"row {b} (len {len(p)})"
        assert close(single, logits[:, b]), f"row {b} (len {len(p)})"


def test_chunked_prefill_matches_whole(backend):
    p = prompts((40,), seed=2)[0]
    whole_tokens, whole = run_single(backend, p, DECODE_STEPS)
    chunk_tokens, chunked = run_single(backend, p, DECODE_STEPS, chunk=7)
    assert chunk_tokens == whole_tokens
    assert close(whole, chunked)
    # The last chunk holds 40 % 7 = 5 tokens after a 35-token prefix: a [5, 40] mask.
    assert backend.mask_bytes_last == 5 * 40 * 4


def test_padded_prefill_mask_bytes(backend):
    batch = prompts()
    run_batched(backend, batch, 0)
    L = max(LENGTHS)
    assert backend.mask_bytes_last == 4 * L * L * 4
    assert backend.mask_bytes_max >= backend.mask_bytes_last


def test_prefix_copy_resumes_like_the_original(backend):
    p = prompts((30,), seed=3)[0]
    tokens, logits = run_single(backend, p, 4)
    backend.add_sequence(1, 40)
    backend.prefill(1, p[:20])
    kv, nbytes = backend.save_prefix(1, 20)
    assert nbytes == backend.kv_bytes(20)
    backend.remove_sequence(1)
    backend.add_sequence(2, 40)
    backend.copy_prefix(kv, 2, 20)
    assert backend.seq_length(2) == 20
    resumed = backend.prefill(2, p[20:])
    backend.remove_sequence(2)
    assert int(resumed.argmax()) == tokens[0]
    assert close(logits[0], resumed)


def test_cache_hit_rows_batched_with_cold_rows_match_cold_runs(backend):
    """A cohort of rows resuming from copied prefixes of different lengths (one row cold)
    prefilled as ONE padded forward: each row's greedy tokens and logits equal its cold run."""
    shared = prompts((24,), seed=5)[0]
    tails = prompts((3, 11, 6, 9), seed=6)
    batch = [shared + tails[0], shared[:20] + tails[1], tails[2], shared + tails[3]]
    reuse = [24, 20, 0, 23]  # the last row reuses all but one of its shared tokens
    backend.add_sequence(50, 40)
    backend.prefill(50, shared)
    kv, _ = backend.save_prefix(50, 24)
    backend.remove_sequence(50)
    ids = [60, 61, 62, 63]
    for i, p, n in zip(ids, batch, reuse, strict=True):
        backend.add_sequence(i, len(p) + DECODE_STEPS)
        if n:
            backend.copy_prefix(kv, i, n)
    try:
        out = [backend.prefill_batch(ids, [p[n:] for p, n in zip(batch, reuse, strict=True)])]
        for _ in range(DECODE_STEPS):
            out.append(backend.decode(ids, [int(t) for t in out[-1].argmax(-1)]))
        assert [backend.seq_length(i) for i in ids] == [len(p) + DECODE_STEPS for p in batch]
    finally:
        for i in ids:
            backend.remove_sequence(i)
    # keys span the longest prefix + new tokens: [B, L, S], L = 11 new, S = 23 + 10 (last row)
    assert backend.mask_bytes_last == 4 * 11 * 33 * 4
    logits = np.stack(out)
    for b, p in enumerate(batch):
        tokens, single = run_single(backend, p, DECODE_STEPS)
        assert [int(x.argmax()) for x in logits[:, b]] == tokens, f"row {b}"
        assert close(single, logits[:, b]), f"row {b}"


@NO_MLX
def test_torch_and_mlx_logits_agree(tiny):
    torch_be = load_backend("torch", tiny, dtype="float32")
    mlx_be = load_backend("mlx", tiny, dtype="float32")
    batch = prompts()
    b_torch, b_mlx = (run_batched(be, batch, DECODE_STEPS) for be in (torch_be, mlx_be))
    assert close(b_torch[0], b_mlx[0]), "batched prefill"
    assert close(b_torch[1:], b_mlx[1:]), "batched decode"
    c_torch, c_mlx = (
        run_single(be, batch[3], DECODE_STEPS, chunk=7)[1] for be in (torch_be, mlx_be)
    )
    assert close(c_torch[0], c_mlx[0]), "chunked prefill"
    assert close(c_torch[1:], c_mlx[1:]), "decode after chunked prefill"


@pytest.mark.slow
@NO_MLX
def test_smollm2_torch_and_mlx_agree_on_greedy_tokens():
    pytest.importorskip("gguf")
    try:
        loaded = load_model("smollm2-135m")
    except ValueError as e:
        pytest.skip(str(e))
    tok = loaded.tokenizer
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tok.encode(tok.apply_chat_template(chat))
    results = []
    for name in ("torch", "mlx"):
        be = load_backend(name, loaded, dtype="float32")
        results.append(run_single(be, prompt, 7))
        del be
    (t_tokens, t_logits), (m_tokens, m_logits) = results
    assert t_tokens == m_tokens, (tok.decode(t_tokens), tok.decode(m_tokens))
    assert close(t_logits, m_logits, SMOLLM2_REL_TOL)


def test_a_float16_model_on_cpu_prefills_on_sdpa():
    """The prefill kernel takes float32 and bfloat16: a float16 model keeps SDPA, and serves."""
    be = TorchBackend(load_model("tiny"), dtype="float16")
    assert be.prefill_path == "torch"
    single, _ = run_single(be, prompts((20,), seed=9)[0], 3)
    assert len(single) == 4


@pytest.mark.parametrize("kernels", [True, False], ids=["kernel", "sdpa"])
def test_decode_over_a_slot_window_with_holes_and_out_of_order_rows(kernels):
    """The pool's one-call decode attention: rows in any order, a freed slot inside the window,
    and a pool that grows mid-run all give each row its per-row greedy tokens."""
    be = TorchBackend(load_model("tiny"), dtype="float32", kernels=kernels)
    assert be.decode_path == ("kernel" if kernels and COMPILER else "torch")
    batch = prompts((9, 23, 40, 31), seed=4)
    singles = [run_single(be, p, DECODE_STEPS)[0] for p in batch]
    for i, p in enumerate(batch):
        be.add_sequence(i, len(p) + DECODE_STEPS)
        be.prefill(i, p)
    be.add_sequence(9, 8)  # a slot between rows, then freed: a hole in the window
    be.remove_sequence(1)
    be.remove_sequence(9)
    be.add_sequence(1, len(batch[1]) + DECODE_STEPS + 600)  # larger: the pool grows, copying
    be.prefill(1, batch[1])
    order = [3, 1, 0, 2]  # not slot order
    tokens = {i: [singles[i][0]] for i in order}
    for _ in range(DECODE_STEPS):
        logits = be.decode(order, [tokens[i][-1] for i in order])
        for i, row in zip(order, logits, strict=True):
            tokens[i].append(int(row.argmax()))
    assert {i: tokens[i] for i in range(4)} == dict(enumerate(singles))


@pytest.mark.skipif(not int4_kernels_available(), reason="torch has no CPU int4 kernels")
@pytest.mark.parametrize("kernels", [True, False], ids=["ours", "torch"])
def test_int4_logits_match_the_dequantized_float_path(kernels):
    """On our int4 kernel (cpu_q4.cpp where the CPU has AVX512-BF16, else cpu_q4_f32.cpp with
    float32 activations where it has AVX2) and on torch's."""
    loaded = quantized_tiny()
    int4 = TorchBackend(loaded, dtype="int4", kernels=kernels)
    ours = int4.model.model.layers[0].mlp.down_proj.matvec is not None
    built = cpu_kernels.q4_matvec() or cpu_kernels.q4_matvec_f32()
    assert ours == (kernels and built is not None)
    assert int4.dtype == "int4"
    assert (
        sum(isinstance(m, Int4Linear) for m in int4.model.modules()) == 2 * 4
    )  # qkv, o, gate_up, down in 2 layers
    assert isinstance(int4.model.head_int4, Int4PairLinear)  # the Q8_0 logits
    dense = load_backend("torch", loaded, dtype="float32")
    batch = prompts(seed=5)
    got, want = run_batched(int4, batch, DECODE_STEPS), run_batched(dense, batch, DECODE_STEPS)
    # int4 runs its activations, scales and zeros in bfloat16 (8-bit mantissa): measured
    # max |diff| 0.5% of the largest |logit| here, every greedy token equal; a wrong zero point
    # (m instead of m + 8d) moved a random matmul's outputs by 68% of their largest.
    assert close(want, got, rel_tol=0.03)
    assert (want.argmax(-1) == got.argmax(-1)).mean() >= 0.9


@pytest.mark.skipif(cpu_kernels.q4_matvec_f32() is None, reason="no AVX2+FMA build")
def test_without_native_bf16_auto_picks_int4_on_float32_activations(monkeypatch):
    """What an AVX2-only CPU gets (native bf16 hidden here): dtype auto is int4 with float32
    activations on our AVX2 kernels (cpu_q4_f32.cpp), no dense copy kept, each block's decode
    in one call (cpu_block.cpp in float32), and logits within float32 rounding of the float32
    path on the same dequantized weights (measured 1e-6 on SmolLM2) and of the same blocks as
    torch ops; without our kernels, float32."""
    import engine.backends.torch.backend as torch_backend

    monkeypatch.setattr(torch_backend, "cpu_has_native_bf16", lambda: False)
    loaded = quantized_tiny()
    int4 = TorchBackend(loaded)
    assert int4.dtype == "int4" and int4.activations == "float32"
    linears = [m for m in int4.model.modules() if isinstance(m, Int4Linear)]
    assert len(linears) == 2 * 4 and all(m.dense is None for m in linears)
    assert int4.decode_path == "fused" and int4._kv_dtype == torch.float32
    assert TorchBackend(loaded, kernels=False).dtype == "float32"
    ops = TorchBackend(loaded, fused=False)  # the same blocks as torch ops
    assert ops.decode_path == "kernel"
    dense = load_backend("torch", loaded, dtype="float32")
    batch = prompts(seed=11)
    got, want = run_batched(int4, batch, DECODE_STEPS), run_batched(dense, batch, DECODE_STEPS)
    assert close(want, got, rel_tol=1e-4)  # float32 sums in another order; a wrong m: tens of %
    assert (want.argmax(-1) == got.argmax(-1)).all()
    assert close(run_batched(ops, batch, DECODE_STEPS), got, rel_tol=1e-4)


@pytest.mark.skipif(not (int4_kernels_available() and COMPILER), reason="no int4 or C++ build")
def test_a_fused_int4_decode_step_matches_the_torch_ops_it_replaces():
    """cpu_decode.cpp's decode_layer (each block one call) against the same blocks run as torch
    ops: same bfloat16 rounding points, so only float32 summation order differs; batched rows
    in a window with a hole, up to 20 rows (past DENSE_ROWS: the bfloat16 copies)."""
    loaded = quantized_tiny()
    fused = TorchBackend(loaded, dtype="int4")
    ops = TorchBackend(loaded, dtype="int4", fused=False)
    assert (fused.decode_path, ops.decode_path) == ("fused", "kernel")
    for be in (fused, ops):
        be.add_sequence(50, 8)  # a hole: slot 0 is freed before the batch runs
    for n in (4, 20):
        batch = prompts(tuple(5 + 3 * i for i in range(n)), seed=n)
        got, want = run_batched(fused, batch, DECODE_STEPS), run_batched(ops, batch, DECODE_STEPS)
        if n == 4:
            fused.remove_sequence(50), ops.remove_sequence(50)
        assert (got.argmax(-1) == want.argmax(-1)).all(), n
        # measured bit-equal here (SmolLM2's wider sums differ in the last bits); a wrong rope
        # sign moved tiny's logits by 26-35% of the largest with every greedy token equal
        assert close(want, got, rel_tol=1e-3), n


@pytest.mark.skipif(not int4_kernels_available(), reason="torch has no CPU int4 kernels")
@pytest.mark.parametrize("ours", [True, False])
def test_a_q8_0_matrix_on_two_int4_matrices_is_the_same_matrix(ours):
    """hi*16 + lo splits every code exactly: only the bfloat16 rounding of the scales and the
    activations remains (checked against an exact float64 product)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    from engine.model.q8 import from_q8_0_blocks

    w = np.random.default_rng(7).normal(size=(96, 128)).astype(np.float32)
    q8 = from_q8_0_blocks(quantize(w, GGMLQuantizationType.Q8_0), 96, 128)
    assert q8.q.min() < -64 and q8.q.max() > 64  # both nibbles of negative and positive codes
    x = torch.from_numpy(np.random.default_rng(8).normal(size=(3, 128)).astype(np.float32))
    xb = x.to(torch.bfloat16)
    want = xb.double() @ torch.from_numpy(q8.dequantize()).double().T
    matvec = cpu_kernels.q4_matvec() if ours else None
    if ours and matvec is None:
        pytest.skip("no AVX512-BF16: our int4 kernel is not built")
    got = Int4PairLinear(q8, matvec=matvec)(xb).double()
    assert got.dtype == torch.float64 and got.shape == (3, 96)
    err = (got - want).abs().max() / want.abs().max()
    assert err < 0.01, err  # a wrong split (lo signed, or zero 0) is off by tens of percent


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_quantized_blocks_decode_as_gguf_does(kind):
    pytest.importorskip("gguf")
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    from engine.model.q4 import from_q4_1_blocks
    from engine.model.q8 import from_q8_0_blocks

    decode = {"Q4_1": from_q4_1_blocks, "Q8_0": from_q8_0_blocks}[kind]
    w = np.random.default_rng(6).normal(size=(8, 64)).astype(np.float32)
    raw = quantize(w, GGMLQuantizationType[kind])
    ref = dequantize(raw, GGMLQuantizationType[kind]).reshape(8, 64)
    assert np.array_equal(decode(raw, 8, 64).dequantize(), ref)


def test_a_bfloat16_models_prompt_cache_copy_is_bfloat16_and_exact(tiny):
    """The CPU pool is bfloat16 where the kernel reads it and bf16 is native, else float32; a
    bfloat16 model only ever writes bfloat16 values there: the prompt cache keeps them in
    bfloat16, half the bytes of a float32 pool, bit for bit."""
    be = load_backend("torch", tiny, dtype="bfloat16")
    be.add_sequence(1, 64)
    be.prefill(1, prompts((30,), seed=9)[0])
    be.decode([1], [7])
    (k, v), nbytes = be.save_prefix(1, 31)
    c = be.caches[1]
    native = be.decode_path == "kernel" and cpu_has_native_bf16()
    assert c.k.dtype == (torch.bfloat16 if native else torch.float32)
    assert be.element_size == c.k.element_size()  # the KV budget counts the pool's bytes
    assert k.dtype == v.dtype == torch.bfloat16 and nbytes == 2 * (k.numel() + v.numel())
    assert torch.equal(k.float(), c.k[:, :, :31].float())
    assert torch.equal(v.float(), c.v[:, :, :31].float())


@pytest.mark.skipif(not int4_kernels_available(), reason="torch has no CPU int4 kernels")
def test_the_int4_head_serves_every_row_count_and_rounds_each_row_as_alone():
    """The Q8_0 head runs on the int4 pair for any number of rows (no dense copy is kept: the
    embedding is looked up in the file's blocks), and a row's logits do not depend on what
    else is in the batch, so greedy tokens do not either."""
    backend = load_backend("torch", quantized_tiny(), dtype="int4")
    model = backend.model
    assert not hasattr(model.model.embed_tokens, "weight")  # no dense table
    dim = model.args.hidden_size
    h = torch.randn(32, dim, dtype=getattr(torch, backend.activations))  # bf16, or f32 on AVX2
    alone = torch.cat([model.logits(h[r : r + 1]) for r in range(32)])
    for rows in (1, 8, 9, 32):
        assert torch.equal(model.logits(h[:rows]), model.head_int4(h[:rows])), rows
        assert torch.equal(model.logits(h[:rows]), alone[:rows]), rows
