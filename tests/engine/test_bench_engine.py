"""pytest-benchmark timings of the engine core on SmolLM2 (torch): a 512-token prefill, and one
decode step at batch 1 and 4 after 512 tokens of context, for every dtype this CPU serves
(bfloat16 only with native bf16 dot products; int4 there on bfloat16 activations, elsewhere
on float32 ones where our AVX2 kernels built). CI runs each once (benchmarks disabled);
measure with `pytest tests/engine/test_bench_engine.py --benchmark-enable`."""

import pytest

from engine.backends import load_backend
from engine.backends.kernels import cpu as cpu_kernels
from engine.backends.kernels.cpu_features import cpu_has_native_bf16
from engine.memory import peak_rss_bytes, reset_peak_rss
from engine.model.load import load_model

from helpers.marks import needs_smollm2

pytestmark = [pytest.mark.slow, needs_smollm2]
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


def test_prefill_512_against_torch_gemm(benchmark, backend):
    """The prefill's achieved FLOP rate as a fraction of torch's own GEMM on this CPU, in the
    dtype the prefill's matmuls run in (int4 layers use their copy in the activations' dtype
    above 16 rows: bfloat16, or float32 on a CPU without native bfloat16):
    `gemm_fraction` in extra_info (issue 11's goal: >= 0.6)."""
    import time

    import torch

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

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    seconds = min(seconds[1:] or seconds)
    fraction = prefill_flops(backend.args, len(PROMPT)) / seconds / gemm_flops_s
    benchmark.extra_info.update(
        dtype=backend.dtype, gemm_flops_s=gemm_flops_s, gemm_fraction=fraction
    )
    assert 0 < fraction < 2  # a FLOP count off by 2x or more (or a broken clock) fails
