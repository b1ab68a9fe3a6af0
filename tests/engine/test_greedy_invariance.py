"""Greedy output that depends on the prompt alone: not on how a prompt-cache hit split it, nor
on which other sequences share the prefill or the decode step. Before, a suffix of 16 rows or
fewer ran the int4 kernel while longer forwards ran the GEMM (two roundings), and the bfloat16
kernel summed a step's rows in an order that followed how many there were."""

import asyncio
import os

import aiohttp
import numpy as np
import pytest
import torch

from engine.backends.kernels import cpu as cpu_kernels
from engine.backends.kernels.cpu_features import cpu_flags, onednn_isa_cap
from engine.backends.torch.backend import TorchBackend

from helpers.marks import needs_smollm2
from helpers.model_files import quantized_tiny

PROMPT = [int(t) for t in np.random.default_rng(3).integers(3, 259, 50)]
OTHERS = [[7] * 5, [int(t) for t in np.random.default_rng(4).integers(3, 259, 33)], [9] * 61]


def amx_rounds_by_rows() -> bool:
    """torch's bfloat16 GEMMs round a row by the call's row count here: a CPU with AMX whose
    oneDNN is not capped below it (ONEDNN_MAX_CPU_ISA, read before this process's first GEMM;
    docs/engine.md)."""
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    return onednn_isa_cap(cpu_flags()) is not None and (isa in ("ALL", "DEFAULT") or "AMX" in isa)


def activations(request):
    if request.param == "float32" and cpu_kernels.q4_matvec_f32() is None:
        pytest.skip("no AVX2+FMA build")
    if request.param == "bfloat16" and cpu_kernels.q4_matvec() is None:
        pytest.skip("no AVX512-BF16 build")
    if request.param == "bfloat16" and amx_rounds_by_rows():
        pytest.skip("AMX: bfloat16 GEMMs round by row count (ONEDNN_MAX_CPU_ISA uncapped)")
    return request.param


@pytest.fixture(scope="module", params=["bfloat16", "float32"])
def int4(request):
    """tiny in int4 on our kernels, with bfloat16 activations (AVX512-BF16) or float32 ones
    (what an AVX2-only CPU runs)."""
    which = activations(request)
    mp = pytest.MonkeyPatch()
    import engine.backends.torch.backend as torch_backend

    if which == "float32":
        mp.setattr(torch_backend, "cpu_has_native_bf16", lambda: False)
    be = TorchBackend(quantized_tiny(), dtype="int4")
    mp.undo()
    assert be.activations == which and be.decode_path == "fused"
    return be


def prefill_split(be, split: int, seq: int = 0):
    """PROMPT's logits and KV with its first `split` tokens computed in another sequence and
    copied in (a prompt-cache hit), the rest prefilled after them; 0: in one forward."""
    be.add_sequence(seq, len(PROMPT) + 8)
    if split:
        be.add_sequence(seq + 1, len(PROMPT))
        be.prefill(seq + 1, PROMPT[:split])
        kv, _ = be.save_prefix(seq + 1, split)
        be.remove_sequence(seq + 1)
        be.copy_prefix(kv, seq, split)
        logits = be.prefill(seq, PROMPT[split:])
    else:
        logits = be.prefill(seq, PROMPT)
    c = be.caches[seq]
    k, v = c.k[:, :, : len(PROMPT)].clone(), c.v[:, :, : len(PROMPT)].clone()
    be.remove_sequence(seq)
    return logits, k, v


@pytest.mark.parametrize("split", [3, 16, 17, 41, 49])
def test_a_cache_hit_computes_the_prompt_bit_for_bit_as_a_cold_prefill(int4, split):
    want = prefill_split(int4, 0)
    got = prefill_split(int4, split)
    for a, b in zip(want, got, strict=True):
        assert torch.equal(torch.as_tensor(a), torch.as_tensor(b)), split


def test_a_rows_decode_does_not_depend_on_the_rows_beside_it(int4):
    """PROMPT decoded alone and beside 3 others (padded batched prefill, 4-row decode steps):
    the same logits, bit for bit, at every step."""

    def run(batch: list[list[int]]) -> np.ndarray:
        ids = list(range(10, 10 + len(batch)))
        for i, p in zip(ids, batch, strict=True):
            int4.add_sequence(i, len(p) + 12)
        logits = int4.prefill_batch(ids, batch)
        steps = [logits[0]]
        for _ in range(10):
            logits = int4.decode(ids, [int(r.argmax()) for r in logits])
            steps.append(logits[0])
        for i in ids:
            int4.remove_sequence(i)
        return np.stack(steps)

    assert np.array_equal(run([PROMPT]), run([PROMPT, *OTHERS]))


@pytest.mark.slow
@needs_smollm2
@pytest.mark.timeout(900)  # 56 s beside a busy process on every core
def test_smollm2_answers_a_chat_the_same_cold_cached_and_in_company(engine_factory, monkeypatch):
    """The same greedy chat request three times (cold, then from the prompt cache), and once
    among three other chats: one answer, token for token. On a CPU with AMX only with oneDNN
    capped as docs/engine.md says (its AMX GEMMs round by row count)."""
    if cap := onednn_isa_cap(cpu_flags()):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)  # the engine inherits it
    eng = engine_factory("--batch-window-ms", "200", model="smollm2-135m")
    ask = "Write a short story about a lighthouse keeper who finds a message in a bottle."

    def body(text: str) -> dict:
        return {"messages": [{"role": "user", "content": text}], "max_tokens": 96,
                "temperature": 0, "ignore_eos": True}  # fmt: skip

    async def answer(s: aiohttp.ClientSession, text: str) -> dict:
        async with s.post(eng.url + "/v1/chat/completions", json=body(text)) as r:
            assert r.status == 200
            return await r.json()

    async def go():
        async with aiohttp.ClientSession() as s:
            alone = [await answer(s, ask) for _ in range(3)]
            others = ["Name three rivers.", "What is a prime number? Explain at length.", "Hi"]
            company = await asyncio.gather(*(answer(s, t) for t in [ask, *others]))
            return alone, company[0]

    alone, company = asyncio.run(go())
    texts = {a["choices"][0]["message"]["content"] for a in [*alone, company]}
    assert len(texts) == 1, texts
    cached = [a["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) for a in alone]
    assert cached[0] < cached[1], cached  # the repeats were prompt-cache hits


def test_only_a_cpu_with_amx_needs_onednn_capped_for_invariant_answers():
    assert onednn_isa_cap(frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})) == (
        "AVX512_CORE_BF16"
    )
    assert onednn_isa_cap(frozenset({"avx512f", "avx512_bf16"})) is None  # row-count invariant
    assert onednn_isa_cap(frozenset({"avx2", "fma"})) is None
