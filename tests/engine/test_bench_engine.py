"""pytest-benchmark timings of the engine core on SmolLM2 (torch): a 512-token prefill, and one
decode step at batch 1 and 4 after 512 tokens of context, for every dtype this CPU serves
(bfloat16 only with native bf16 dot products; int4 there on bfloat16 activations, elsewhere
on float32 ones where our AVX2 kernels built). CI runs each once (benchmarks disabled);
measure with `pytest tests/engine/test_bench_engine.py --benchmark-enable`. A benchmark records
its figures in extra_info and asserts no timing: what it derives from one (the FLOP count
behind gemm_fraction) is checked by arithmetic."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from engine.backends import load_backend
from engine.backends.kernels import cpu as cpu_kernels
from engine.backends.kernels.cpu_features import cpu_has_native_bf16
from engine.backends.torch.backend import TorchBackend
from engine.memory import peak_rss_bytes, reset_peak_rss
from engine.model.load import load_model

from helpers.marks import needs_smollm2

PROMPT = [(i * 7919) % 48000 + 100 for i in range(512)]
NATIVE = cpu_has_native_bf16()
INT4 = NATIVE or cpu_kernels.q4_matvec_f32() is not None
DTYPES = ["float32", *(["bfloat16"] if NATIVE else []), *(["int4"] if INT4 else [])]


@pytest.fixture(scope="module")
def loaded():
    return load_model("smollm2-135m")


@pytest.fixture(scope="module", params=DTYPES)
def backend(request, loaded):
    return load_backend("torch", loaded, dtype=request.param)


@pytest.mark.slow
@needs_smollm2
def test_prefill_512(benchmark, backend):
    def run():
        backend.add_sequence(0, 600)
        try:
            return backend.prefill(0, PROMPT)
        finally:
            backend.remove_sequence(0)

    reset_peak_rss()
    logits = benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    assert logits.shape == (backend.args.vocab_size,)
    benchmark.extra_info.update(tokens=512, dtype=backend.dtype, peak_rss_bytes=peak_rss_bytes())


@pytest.mark.slow
@needs_smollm2
@pytest.mark.parametrize("batch", [1, 4])
def test_decode_step_after_512(benchmark, backend, batch):
    backend.add_sequence(0, 600)
    backend.prefill(0, PROMPT)
    kv, _ = backend.save_prefix(0, len(PROMPT))
    backend.remove_sequence(0)
    ids = list(range(10, 10 + batch))
    for s in ids:
        backend.add_sequence(s, 600)
        backend.copy_prefix(kv, s, len(PROMPT))
    reset_peak_rss()
    try:
        logits = benchmark.pedantic(
            lambda: backend.decode(ids, [42] * batch), rounds=20, warmup_rounds=2
        )
    finally:
        for s in ids:
            backend.remove_sequence(s)
    assert logits.shape == (batch, backend.args.vocab_size)
    benchmark.extra_info.update(
        batch=batch, context=len(PROMPT), dtype=backend.dtype, peak_rss_bytes=peak_rss_bytes()
    )


def prefill_flops(args, tokens: int) -> float:
    """Multiply-adds x 2 of a causal prefill: the projections and MLP of every layer, and the
    attention scores and weighted values over the causal half (the logits of the last token
    only, as the backend computes them)."""
    d, kv = args.hidden_size, args.num_key_value_heads * args.head_dim
    per_token = d * (d + 2 * kv) + d * d + 3 * d * args.intermediate_size
    attention = 2 * args.num_attention_heads * args.head_dim * tokens * (tokens + 1) / 2
    return 2 * (args.num_hidden_layers * (per_token * tokens + attention) + d * args.vocab_size)


def test_prefill_flops_is_what_torch_counts_in_a_causal_prefill():
    """prefill_flops against torch's FlopCounterMode over tiny's float32 prefill on torch's ops
    (SDPA as its math decomposition): every linear (QKV, O, the MLP, the last token's logits)
    exactly, and the attention's two batched matmuls, which SDPA runs over the whole T x T
    square, scaled to the causal half, (T + 1) / 2T. Three lengths pin the constant, linear and
    quadratic terms apart."""
    be = TorchBackend(load_model("tiny"), dtype="float32", kernels=False)
    for tokens in (1, 17, 64):
        be.add_sequence(0, tokens)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            be.prefill(0, [3 + i % 250 for i in range(tokens)])
        be.remove_sequence(0)
        counts = dict(counter.get_flop_counts()["Global"])
        linear, square = counts.pop(torch.ops.aten.mm), counts.pop(torch.ops.aten.bmm)
        assert not counts, counts  # no other op that torch counts
        causal = square * (tokens + 1) / (2 * tokens)
        assert prefill_flops(be.args, tokens) == linear + causal, (tokens, linear, square)


@pytest.mark.slow
@needs_smollm2
def test_prefill_512_against_torch_gemm(benchmark, backend):
    """The prefill's achieved FLOP rate as a fraction of torch's own GEMM on this CPU, in the
    dtype the prefill's matmuls run in (int4 layers use their copy in the activations' dtype
    above 16 rows: bfloat16, or float32 on a CPU without native bfloat16):
    `gemm_fraction` in extra_info (issue 11's goal: >= 0.6). Recorded, not asserted: the two
    rates are timed apart, under whatever else runs then (a fresh clone read 2.41); the FLOP
    count is checked by test_prefill_flops_is_what_torch_counts_in_a_causal_prefill."""
    import time

    dtype = getattr(torch, backend.activations)
    a = torch.randn(512, backend.args.hidden_size, dtype=dtype)
    w = torch.randn(backend.args.intermediate_size, backend.args.hidden_size, dtype=dtype)
    torch.nn.functional.linear(a, w)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < 1.0:
        torch.nn.functional.linear(a, w)
        n += 1
    gemm_flops_s = n * 2 * a.numel() * w.shape[0] / (time.perf_counter() - t0)

    seconds = []  # every timed call (with benchmarks disabled, as in CI, there is one)

    def run():
        backend.add_sequence(0, 600)
        t0 = time.perf_counter()
        try:
            return backend.prefill(0, PROMPT)
        finally:
            seconds.append(time.perf_counter() - t0)
            backend.remove_sequence(0)

    logits = benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    assert logits.shape == (backend.args.vocab_size,)
    seconds = min(seconds[1:] or seconds)
    fraction = prefill_flops(backend.args, len(PROMPT)) / seconds / gemm_flops_s
    benchmark.extra_info.update(
        dtype=backend.dtype, gemm_flops_s=gemm_flops_s, gemm_fraction=fraction
    )
