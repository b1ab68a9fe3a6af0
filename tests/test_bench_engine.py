"""pytest-benchmark timings of the engine core on SmolLM2 (torch): one 512-token prefill, and
one decode step at batch 1 and 4. CI runs each once (benchmarks disabled); measure with
`pytest tests/test_bench_engine.py --benchmark-enable`."""

import pytest
from conftest import needs_smollm2

from engine.backends import load_backend
from engine.memory import peak_rss_bytes, reset_peak_rss
from engine.model.load import load_model

pytestmark = [pytest.mark.slow, needs_smollm2]
PROMPT = [(i * 7919) % 48000 + 100 for i in range(512)]


@pytest.fixture(scope="module")
def backend():
    return load_backend("torch", load_model("smollm2-135m"))


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
def test_decode_step(benchmark, backend, batch):
    ids = list(range(10, 10 + batch))
    for s in ids:
        backend.add_sequence(s, 200)
        backend.prefill(s, PROMPT[:64])
    reset_peak_rss()
    try:
        logits = benchmark.pedantic(
            lambda: backend.decode(ids, [42] * batch), rounds=20, warmup_rounds=2
        )
    finally:
        for s in ids:
            backend.remove_sequence(s)
    assert logits.shape == (batch, backend.args.vocab_size)
    benchmark.extra_info.update(batch=batch, dtype=backend.dtype, peak_rss_bytes=peak_rss_bytes())
