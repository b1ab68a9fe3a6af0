"""The CPU decode attention kernel (engine/backends/cpu_decode.cpp) against torch's SDPA:
grouped-query heads, per-row lengths, strided slot windows, float32 and bfloat16 pools."""

import shutil

import pytest
import torch
import torch.nn.functional as F

from engine.backends.kernels import cpu as cpu_kernels

KERNEL = cpu_kernels.decode_attention()
pytestmark = pytest.mark.skipif(
    KERNEL is None and shutil.which("c++") is None, reason="no C++ compiler: SDPA serves"
)


def test_the_kernel_builds_where_a_compiler_is():
    assert KERNEL is not None  # a machine with c++ (and ninja, a dependency) must build it


def sdpa(q, k, v, lengths):
    """The reference: SDPA in float64 with an additive mask past each row's length."""
    W, _, S, _ = k.shape
    mask = torch.zeros(W, 1, 1, S, dtype=torch.float64)
    mask.masked_fill_(torch.arange(S).view(1, 1, 1, S) >= lengths.view(W, 1, 1, 1), -1e30)
    out = F.scaled_dot_product_attention(
        q.double().unsqueeze(2), k.double(), v.double(), attn_mask=mask, enable_gqa=True
    )
    return out.squeeze(2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [(9, 3, 64), (4, 4, 16), (8, 1, 128), (4, 2, 32)])
def test_decode_attention_matches_sdpa(dtype, heads):
    H, KVH, D = heads
    torch.manual_seed(0)
    pool_k = torch.randn(5, KVH, 300, D).to(dtype)  # [slots, KVH, capacity, D]
    pool_v = torch.randn(5, KVH, 300, D).to(dtype)
    k, v = pool_k[1:4, :, :257], pool_v[1:4, :, :257]  # a window of slots, cut at its width
    lengths = torch.tensor([257, 1, 130])
    q = torch.randn(3, H, D).to(dtype).float()  # the engine's q: values of the model's dtype
    got = KERNEL(q, k, v, lengths, D**-0.5)
    want = sdpa(q, k, v, lengths)
    assert got.dtype == torch.float32 and got.shape == (3, H, D)
    assert (got.double() - want).abs().max() < 1e-5  # a wrong length, head or stride: ~1
    # row 1 sees only its first key: its output is that key's V row for every head
    assert torch.allclose(got[1], v[1, :, 0].float().repeat_interleave(H // KVH, 0), atol=1e-6)


def test_bad_lengths_and_head_sizes_raise_instead_of_reading_past_the_pool():
    k = v = torch.zeros(1, 3, 16, 64)
    with pytest.raises(RuntimeError, match="length out of range"):
        KERNEL(torch.zeros(1, 9, 64), k, v, torch.tensor([17]), 0.125)
    k48 = torch.zeros(1, 3, 16, 48)
    with pytest.raises(RuntimeError, match="head size 48 is not built"):
        KERNEL(torch.zeros(1, 9, 48), k48, k48, torch.tensor([3]), 0.125)


def test_servegate_kernels_0_keeps_sdpa(monkeypatch):
    monkeypatch.setenv("SERVEGATE_KERNELS", "0")
    cpu_kernels._module.cache_clear()
    try:
        assert cpu_kernels.decode_attention() is None
    finally:
        monkeypatch.undo()
        cpu_kernels._module.cache_clear()


def test_a_killed_builds_lock_is_cleared_and_the_sources_copied_once(tmp_path, monkeypatch):
    """torch's loader waits forever on a lock a killed build left; ninja rebuilds when a
    source's path changes (every harness worktree has its own): the build folder holds copies."""
    import os
    import time

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    stale = tmp_path / "k" / "lock"
    stale.parent.mkdir()
    stale.touch()
    old = time.time() - cpu_kernels.STALE_LOCK_S - 1
    os.utime(stale, (old, old))
    folder = cpu_kernels._build_dir("k")
    assert not stale.exists()
    files = cpu_kernels.SOURCES + cpu_kernels.HEADERS
    copies = [folder / src.name for src in files]
    assert [c.read_bytes() for c in copies] == [s.read_bytes() for s in files]
    stamps = [c.stat().st_mtime_ns for c in copies]
    (folder / "lock").touch()  # a build in progress: kept
    cpu_kernels._build_dir("k")
    assert (folder / "lock").exists()
    assert [c.stat().st_mtime_ns for c in copies] == stamps  # not rewritten


PREFILL = cpu_kernels.prefill_attention()


def prefill_mask(lengths, offsets, L, holes=()):
    """The backend's prefill mask: row b's query i sees keys 0..offsets[b]+i of its cached
    prefix and own tokens, none past offsets[b]+lengths[b] (a padding query sees them all);
    `holes` (b, i, key) hide one more key each."""
    B = len(lengths)
    S = max(o + n for o, n in zip(offsets, lengths, strict=True))
    off = torch.tensor(offsets).view(B, 1, 1)
    n = torch.tensor(lengths).view(B, 1, 1)
    i, j = torch.arange(L).view(1, L, 1), torch.arange(S).view(1, 1, S)
    mask = torch.zeros(B, L, S, dtype=torch.float64)
    mask.masked_fill_(~((j <= off + i) & (j < off + n)), float("-inf"))
    for b, q, key in holes:
        mask[b, q, key] = float("-inf")
    return mask.unsqueeze(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [(9, 3, 64), (4, 4, 16), (8, 1, 128), (4, 2, 32)])
def test_prefill_attention_matches_sdpa_under_the_backends_masks(dtype, heads):
    """A cold cohort with right padding, rows extending cached prefixes, and holes in a mask;
    lengths off the kernel's 32-wide tiles; V strided as the fused projection leaves it."""
    H, KVH, D = heads
    torch.manual_seed(0)
    cases = [
        ([70, 33, 1], [0, 0, 0], []),  # cold, padded to 70
        ([40, 5], [90, 0], []),  # one row after a 90-token prefix, one cold
        ([64], [0], [(0, 50, 3), (0, 63, 40), (0, 40, 40)]),  # holes, one on the diagonal
    ]
    for lengths, offsets, holes in cases:
        mask = prefill_mask(lengths, offsets, max(lengths), holes)
        B, _, L, S = mask.shape
        q = torch.randn(B, H, L, D).to(dtype)
        k = torch.randn(B, KVH, S, D).to(dtype)
        v = torch.randn(B, S, KVH, D).to(dtype).transpose(1, 2)  # rows of D, strided heads
        mask[:, :, :, : S // 2] += torch.rand(B, 1, L, S // 2, dtype=torch.float64)  # finite
        got = PREFILL(q, k, v, mask.to(dtype), D**-0.5)
        want = F.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), attn_mask=mask, enable_gqa=True
        )
        assert got.dtype == dtype and got.shape == (B, H, L, D)
        tol = 1e-5 if dtype == torch.float32 else 1e-2  # the output rounded to bfloat16
        assert (got.double() - want).abs().max() < tol  # a wrong span, head or stride: ~1


def test_prefill_attention_rejects_mixed_dtypes_and_unbuilt_head_sizes():
    q = k = v = torch.zeros(1, 3, 4, 64)
    mask = torch.zeros(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="share one dtype"):
        PREFILL(q, k, v, mask.to(torch.bfloat16), 0.125)
    q48 = torch.zeros(1, 3, 4, 48)
    with pytest.raises(RuntimeError, match="head size 48 is not built"):
        PREFILL(q48, q48, q48, mask, 0.125)


def test_rms_norm_and_swiglu_round_as_the_torch_ops_they_replace():
    """bfloat16 RMSNorm and silu(gate) * up, each rounded where torch rounds: equal but for
    exp's and the sum's last bits (a few elements a bfloat16 step or two apart)."""
    from engine.backends.torch.llama import MLP, RMSNorm

    torch.manual_seed(0)
    norm = RMSNorm(576, 1e-5).to(torch.bfloat16)
    norm.weight.data = torch.randn(576).to(torch.bfloat16)
    x = (torch.randn(2, 300, 576) * 4).to(torch.bfloat16)
    gate_up = (torch.randn(600, 2 * 1536) * 3).to(torch.bfloat16)
    want = (norm(x), F.silu(gate_up[:, :1536]) * gate_up[:, 1536:])
    norm.kernel = cpu_kernels.rms_norm()
    got = (norm(x), cpu_kernels.swiglu()(gate_up))
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == torch.bfloat16
        assert (g == w).float().mean() > 0.995  # a wrong formula or rounding: most differ
        step = w.float().abs().clamp_min(1e-30) * 2**-6  # two bfloat16 steps
        assert ((g.float() - w.float()).abs() <= step).all()
    mlp = MLP(type("A", (), {"hidden_size": 8, "intermediate_size": 4})())
    mlp.swiglu = cpu_kernels.swiglu()  # the module's hook: [B, T, 2I] in, [B, T, D] out
    y = torch.randn(2, 3, 8).to(torch.bfloat16)
    assert mlp.to(torch.bfloat16)(y).shape == (2, 3, 8)


Q4_SHAPES = [(96, 576), (32, 1536), (48, 64)]  # SmolLM2's projections' widths, and a small one


def random_q4(rng, N: int, K: int):
    """A Q4_1 matrix with float16-exact d and m, as a GGUF stores them."""
    import numpy as np

    from engine.model.q4 import Q4Weight

    d = (rng.random((N, K // 32)) * 0.01).astype(np.float16).astype(np.float32)
    m = (-rng.random((N, K // 32)) * 0.08).astype(np.float16).astype(np.float32)
    return Q4Weight(rng.integers(0, 16, (N, K)).astype(np.uint8), d, m)


@pytest.mark.skipif(cpu_kernels.q4_matvec() is None, reason="no AVX512-BF16: torch's int4 serves")
def test_q4_matvec_matches_the_dequantized_matrix():
    """Every row count of a decode batch (the kernel takes rows in fours), three shapes of
    SmolLM2's projections; the float16 d and m of a Q4_1 matrix are exact."""
    import numpy as np

    from engine.backends.torch.int4 import pack_q4

    rng = np.random.default_rng(0)
    matvec = cpu_kernels.q4_matvec()
    for N, K in Q4_SHAPES:
        w = random_q4(rng, N, K)
        dense = torch.from_numpy(w.dequantize()).double()
        for M in range(1, 7):
            x = torch.randn(M, K).to(torch.bfloat16)
            got = matvec(x, *pack_q4(w))
            want = x.double() @ dense.T
            assert got.dtype == torch.bfloat16 and got.shape == (M, N)
            assert ((got.double() - want).abs() <= want.abs() * 2**-8 + 1e-5).all()
    with pytest.raises(RuntimeError, match="do not fit"):  # w is 48 x 64
        matvec(torch.zeros(1, 128, dtype=torch.bfloat16), *pack_q4(w))


@pytest.mark.skipif(cpu_kernels.q4_weight_t() is None, reason="no AVX512-BF16: torch's int4 serves")
def test_q4_weight_t_rebuilds_the_bfloat16_copy_bit_for_bit_and_none_is_kept():
    """Prefill's GEMM on W^T rebuilt per forward sees exactly the weights the bfloat16 copy
    held (Q4Weight.dequantize, then torch's rounding), and an Int4Linear on our kernel keeps
    no such copy; past DENSE_ROWS rows its forward is the copy's GEMM."""
    import numpy as np

    from engine.backends.torch.int4 import DENSE_ROWS, Int4Linear, pack_q4

    rng = np.random.default_rng(1)
    weight_t = cpu_kernels.q4_weight_t()
    for N, K in Q4_SHAPES:
        w = random_q4(rng, N, K)
        copy = torch.from_numpy(w.dequantize()).to(torch.bfloat16)
        out = torch.empty(K, N, dtype=torch.bfloat16)
        weight_t(*pack_q4(w), out)
        assert torch.equal(out.t(), copy)
        linear = Int4Linear(w, matvec=cpu_kernels.q4_matvec(), weight_t=weight_t)
        assert linear.dense is None
        x = torch.randn(2, DENSE_ROWS, K).to(torch.bfloat16)  # 32 rows: the GEMM
        assert torch.equal(linear(x), torch.nn.functional.linear(x, copy))
    with pytest.raises(RuntimeError, match="not \\[K, N\\]"):
        weight_t(*pack_q4(w), torch.empty(N, K, dtype=torch.bfloat16))


@pytest.mark.skipif(cpu_kernels.q4_matvec_f32() is None, reason="no AVX2+FMA build")
def test_the_float32_int4_kernels_match_the_dequantized_matrix():
    """cpu_q4_f32.cpp (CPUs without native bf16): the product within float32 rounding of a
    float64 one for every row count (rows go in pairs), and W^T bit for bit as
    Q4Weight.dequantize rounds it; an Int4Linear on them keeps no dense copy."""
    import numpy as np

    from engine.backends.torch.int4 import DENSE_ROWS, Int4Linear, pack_q4

    rng = np.random.default_rng(2)
    matvec, weight_t = cpu_kernels.q4_matvec_f32(), cpu_kernels.q4_weight_t_f32()
    for N, K in Q4_SHAPES:
        w = random_q4(rng, N, K)
        dense = torch.from_numpy(w.dequantize())
        for M in range(1, 6):
            x = torch.randn(M, K)
            got, want = matvec(x, *pack_q4(w)).double(), x.double() @ dense.double().T
            assert got.shape == (M, N)
            assert (got - want).abs().max() <= 1e-5 * want.abs().max()
        out = torch.empty(K, N)
        weight_t(*pack_q4(w), out)
        assert torch.equal(out.t(), dense)
        linear = Int4Linear(w, torch.float32, matvec, weight_t)
        assert linear.dense is None
        x = torch.randn(2, DENSE_ROWS, K)
        assert torch.equal(linear(x), torch.nn.functional.linear(x, dense))
        assert (linear(x[:1, :3]) - x[:1, :3] @ dense.T).abs().max() <= 1e-5 * 64
    with pytest.raises(RuntimeError, match="do not fit"):
        matvec(torch.zeros(1, 128), *pack_q4(w))


NAME = "from engine.backends.kernels.cpu import _build_name; print(_build_name())"


def test_each_virtual_environment_builds_in_its_own_folder(tmp_path):
    """A second venv on this machine with the same torch and Python (its packages borrowed
    from this one by a path entry) gets another build folder; the same venv keeps its own."""
    import subprocess
    import sys
    from pathlib import Path

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    (site,) = (tmp_path / "v" / "lib").glob("python*/site-packages")
    here = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "borrowed.pth").write_text("\n".join([*here, str(cpu_kernels.CSRC.parents[3])]))

    def name(python) -> str:
        out = subprocess.run([python, "-c", NAME], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    ours = name(sys.executable)
    assert ours == cpu_kernels._build_name() == name(sys.executable)
    assert name(str(tmp_path / "v" / "bin" / "python")) != ours
    if cpu_kernels._module() is None:
        return
    # the same torch build: the other venv loads this one's finished build, compiling nothing
    out = subprocess.run([str(tmp_path / "v" / "bin" / "python"), "-c", SHARED],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    loaded, named = out.stdout.split()  # under the name of the venv that built it first
    assert loaded == "loaded" and named.startswith("servegate_cpu_kernels_"), (
        out.stdout + out.stderr
    )


SHARED = """
import torch.utils.cpp_extension as ext
def refuse(*a, **k):
    raise RuntimeError("compiled")
ext.load = refuse
from engine.backends.kernels import cpu
m = cpu._module()
print("loaded" if m is not None else "none", m.__name__ if m else "")
"""


def test_a_finished_build_loads_without_torchs_loader(monkeypatch):
    """The build folder's .so loads directly (torch's `load` runs ninja and probes the compiler:
    ~0.15 s of every cold start); with a build in progress (its lock) torch's loader decides."""
    if cpu_kernels._module() is None:
        pytest.skip("the kernels are not built here")
    import torch.utils.cpp_extension

    def refuse(*args, **kwargs):
        raise RuntimeError("torch's loader was called")

    folder = cpu_kernels._build_dir(cpu_kernels._build_name())
    monkeypatch.setattr(torch.utils.cpp_extension, "load", refuse)
    cpu_kernels._module.cache_clear()
    try:
        assert cpu_kernels.decode_attention() is not None  # this venv's build, or the shared one
        monkeypatch.setattr(cpu_kernels, "_load_shared", lambda: None)  # this venv's folder alone
        (folder / "lock").touch()
        cpu_kernels._module.cache_clear()
        assert cpu_kernels.decode_attention() is None  # torch's loader was asked, and refused
    finally:
        (folder / "lock").unlink(missing_ok=True)
        monkeypatch.undo()
        cpu_kernels._module.cache_clear()
