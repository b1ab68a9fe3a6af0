"""The seeds' prefill paths on a real tiny engine, proven by its engagement counters.

Each burst's requests must queue together: a wide --batch-window-ms keeps an idle engine
waiting for the whole burst (it admits as soon as a full cohort is queued), so the cohort
does not depend on how quickly this shared machine delivers four requests.
"""

import random

from helpers.engine_server import metrics, run_concurrently

WINDOW = ("--batch-window-ms", "1000")


def prompts(n: int, length: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)  # distinct prompts: no prompt-cache hits
    return [[rng.randrange(3, 259) for _ in range(length)] for _ in range(n)]


def burst(url: str, n: int, length: int, max_tokens: int = 4) -> list:
    bodies = [
        {"prompt": p, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
        for p in prompts(n, length)
    ]
    results = run_concurrently(url, bodies)
    assert [r[0] for r in results] == [200] * n, results
    assert all(r[1]["usage"]["completion_tokens"] == max_tokens for r in results)
    return results


def test_tight_cap_spills_the_fourth_520_token_row(engine_factory):
    eng = engine_factory("--max-batch-prefill-tokens", "2048", *WINDOW)
    burst(eng.url, 4, 520)
    m = metrics(eng.url)
    assert m['engine_prefill_forwards_total{path="batched"}'] == 1
    assert m['engine_prefill_rows_total{path="batched"}'] == 3
    assert m["engine_prefill_rows_spilled_total"] == 1
    # 520 > the 512-token chunk: the spilled row prefills alone, chunked
    assert m['engine_prefill_rows_total{path="chunked"}'] == 1
    assert m['engine_prefill_forwards_total{path="chunked"}'] == 2


def test_default_cap_batches_all_four(engine_factory):
    eng = engine_factory(*WINDOW)
    burst(eng.url, 4, 520)
    m = metrics(eng.url)
    assert m['engine_prefill_forwards_total{path="batched"}'] == 1
    assert m['engine_prefill_rows_total{path="batched"}'] == 4
    assert m["engine_prefill_rows_spilled_total"] == 0


def test_uncapped_long_prompts_build_the_full_mask(engine_factory):
    eng = engine_factory("--max-batch-prefill-tokens", "0", *WINDOW)
    burst(eng.url, 4, 3000, max_tokens=2)
    m = metrics(eng.url)
    assert m['engine_prefill_rows_total{path="batched"}'] == 4
    assert m["engine_prefill_mask_bytes_max"] == 4 * 3000 * 3000 * 4


def test_default_cap_prefills_long_prompts_chunked(engine_factory):
    eng = engine_factory(*WINDOW)
    burst(eng.url, 4, 3000, max_tokens=2)
    m = metrics(eng.url)
    assert m['engine_prefill_rows_total{path="batched"}'] == 0
    assert m['engine_prefill_rows_total{path="chunked"}'] == 4
    assert m['engine_prefill_forwards_total{path="chunked"}'] == 4 * 6  # ceil(3000 / 512)
    assert 0 < m["engine_prefill_mask_bytes_max"] <= 2 * 4096**2
