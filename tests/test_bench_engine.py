"""pytest-benchmark timings of the engine core on SmolLM2 (torch): a 512-token prefill, and one
decode step at batch 1 and 4 after 512 tokens of context, for every dtype this CPU serves
(int4 and bfloat16 only with native bf16 dot products). CI runs each once (benchmarks
disabled); measure with `pytest tests/test_bench_engine.py --benchmark-enable`."""

import pytest
from conftest import needs_smollm2

from engine.backends import load_backend
from engine.backends.cpu_features import cpu_has_native_bf16
from engine.memory import peak_rss_bytes, reset_peak_rss
from engine.model.load import load_model

pytestmark = [pytest.mark.slow, needs_smollm2]
PROMPT = [(i * 7919) % 48000 + 100 for i in range(512)]
DTYPES = ["float32", *(["bfloat16", "int4"] if cpu_has_native_bf16() else [])]


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
