"""Scheduler fault isolation, in process on the real tiny model: who fails, and what is released.

Forward faults are injected by wrapping one real backend call to raise once; sample faults by
the sampler's test-only fault flag. After every fault the scheduler's invariant must hold.
"""

import pytest

from engine.backends import load_backend
from engine.config import EngineConfig
from engine.metrics import EngineMetrics
from engine.model.load import load_model
from engine.scheduler import Scheduler
from engine.sequence import Sequence


@pytest.fixture(scope="module")
def backend():
    return load_backend("torch", load_model("tiny"), device="cpu", dtype="float32")


def make_scheduler(backend, **config) -> Scheduler:
    c = EngineConfig(model="tiny", batch_window_ms=0, prompt_cache=False, **config)
    return Scheduler(backend, load_model("tiny").tokenizer, c, EngineMetrics(), None)


def run(sched: Scheduler, seqs: list[Sequence], max_steps: int = 2000) -> None:
    for seq in seqs:
        assert sched.submit(seq, lambda _s, _e: None)
    for _ in range(max_steps):
        if sched.idle():
            break
        sched.step()
        sched._update_gauges()
        assert sched.invariant_errors() == []
    assert sched.idle() and sched.live == {} and sched.backend.caches == {}
    m = sched.metrics
    assert m.queue_depth._value.get() == m.running._value.get() == 0
    assert m.kv_live_tokens._value.get() == 0


def seq(prompt_len: int, max_tokens: int = 12, fault: bool = False) -> Sequence:
    s = Sequence(prompt=[10 + i % 50 for i in range(prompt_len)], max_tokens=max_tokens)
    s.ignore_eos, s.sampler.fault = True, fault
    return s


def fail_once(monkeypatch, backend, name: str) -> None:
    real = getattr(backend, name)
    calls = []

    def boom(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError(f"injected {name} fault")
        return real(*args)

    monkeypatch.setattr(backend, name, boom)


def test_a_sample_fault_at_the_head_of_a_cohort_fails_only_that_row(backend):
    sched = make_scheduler(backend)
    seqs = [seq(8, fault=True), seq(9), seq(10), seq(11)]
    run(sched, seqs)
    assert [s.finish_reason for s in seqs] == ["error", "length", "length", "length"]
    assert [len(s.output) for s in seqs[1:]] == [12, 12, 12]


def test_a_batched_prefill_fault_fails_the_cohort_and_releases_it(backend, monkeypatch):
    sched = make_scheduler(backend)
    fail_once(monkeypatch, backend, "prefill_batch")
    cohort = [seq(8), seq(9)]
    run(sched, cohort)
    assert [s.finish_reason for s in cohort] == ["error", "error"]
    after = [seq(8), seq(9)]
    run(sched, after)
    assert [s.finish_reason for s in after] == ["length", "length"]


def test_a_decode_fault_spares_a_parked_chunked_prefill(backend, monkeypatch):
    sched = make_scheduler(backend, prefill_chunk_size=16, max_batch_prefill=1)
    decoding, parked = seq(4, max_tokens=40), seq(200)
    assert sched.submit(decoding, lambda _s, _e: None)
    while not sched.running:
        sched.step()
    fail_once(monkeypatch, backend, "decode")
    run(sched, [parked])
    assert decoding.finish_reason == "error"
    assert parked.finish_reason == "length" and len(parked.output) == 12
