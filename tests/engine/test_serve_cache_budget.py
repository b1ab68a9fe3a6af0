"""The prompt-prefix cache and the KV budget on a real tiny engine."""

import json
import urllib.request

from engine.backends.kernels.cpu_features import cpu_flags, onednn_isa_cap

from helpers.engine_server import metrics, run_concurrently


def same_rounding_in_any_batch(monkeypatch) -> None:
    """The engines compared below round a row alike whatever its batch or cache hit: on a CPU
    with AMX only with oneDNN capped, as docs/engine.md says (they inherit the variable)."""
    if cap := onednn_isa_cap(cpu_flags()):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_shared_prefix_is_reused_and_gives_the_same_tokens(engine_factory, monkeypatch):
    same_rounding_in_any_batch(monkeypatch)
    prefix = list(range(10, 250)) * 2  # 480 tokens
    first = prefix + [5, 6, 7]
    second = prefix + [8, 9]
    body = {"max_tokens": 8, "temperature": 0, "ignore_eos": True}
    cold = engine_factory("--no-prompt-cache")
    warm = engine_factory()
    for eng in (cold, warm):
        for prompt in (first, second):
            ((status, answer, _),) = run_concurrently(eng.url, [{"prompt": prompt, **body}])
            assert status == 200
            eng.__dict__.setdefault("texts", []).append(answer["choices"][0]["text"])
    assert warm.texts == cold.texts
    m = metrics(warm.url)
    assert m["engine_prompt_cache_hits_total"] == 1
    assert m["engine_prompt_cache_tokens_reused_total"] == len(prefix)
    stats = get(warm.url + "/v1/cache/stats")
    assert stats["enabled"] and stats["entries"] == 2 and stats["hits"] == 1
    assert metrics(cold.url)["engine_prompt_cache_hits_total"] == 0


def test_kv_budget_queues_what_does_not_fit_and_rejects_what_never_can(engine_factory):
    # tiny: 2 layers * 2 KV heads * 16 dims * 2 (K, V) * 4 bytes = 512 bytes per token. The
    # dtype is pinned: dtype=auto serves bfloat16 (2 bytes) on CPUs with AVX-512 bf16.
    eng = engine_factory(
        "--kv-cache-budget", str(512 * 700), "--no-prompt-cache", "--dtype", "float32"
    )
    bodies = [
        {"prompt": list(range(3, 259)) + [i + 3], "max_tokens": 200, "ignore_eos": True}
        for i in range(3)
    ]  # 457 tokens each: one fits the budget at a time
    results = run_concurrently(eng.url, bodies)
    assert [r[0] for r in results] == [200] * 3
    m = metrics(eng.url)
    assert m['engine_prefill_rows_total{path="single"}'] == 3  # admitted one by one
    assert m["engine_decode_rows_total"] == m["engine_decode_steps_total"]  # never together
    ((status, answer, _),) = run_concurrently(eng.url, [{"prompt": "x", "max_tokens": 800}])
    assert status == 400 and "KV cache" in answer["error"]["message"]


def test_cache_hits_sent_together_prefill_as_one_batched_cohort(engine_factory, monkeypatch):
    """Four prompts sharing a cached prefix (as chat requests share a system prompt), sent
    together after one earlier request: their suffixes prefill in ONE batched forward, four
    cache hits, and the same tokens as an engine without the cache."""
    same_rounding_in_any_batch(monkeypatch)
    prefix = list(range(10, 250))  # 240 tokens
    bodies = [
        {"prompt": prefix + [5 + i] * (3 + 4 * i), "max_tokens": 6, "temperature": 0}
        for i in range(4)
    ]
    flags = ("--batch-window-ms", "1000")
    texts = {}
    for name, extra in (("cold", ("--no-prompt-cache",)), ("warm", ())):
        eng = engine_factory(*flags, *extra)
        ((status, _, _),) = run_concurrently(eng.url, [{"prompt": prefix + [3], "max_tokens": 1}])
        assert status == 200
        answers = run_concurrently(eng.url, bodies)
        assert [a[0] for a in answers] == [200] * 4
        texts[name] = [a[1]["choices"][0]["text"] for a in answers]
        texts[name + "_metrics"] = metrics(eng.url)
    assert texts["warm"] == texts["cold"]
    m = texts["warm_metrics"]
    assert m["engine_prompt_cache_hits_total"] == 4
    assert m["engine_prompt_cache_tokens_reused_total"] == 4 * len(prefix)
    assert m['engine_prefill_forwards_total{path="batched"}'] == 1
    assert m['engine_prefill_rows_total{path="batched"}'] == 4
    assert m['engine_prefill_forwards_total{path="single"}'] == 1  # the earlier request


def test_the_prompt_cache_budget_follows_the_model_and_health_states_it(engine_factory):
    """auto: one full context's KV (tiny: 16,384 tokens x 2 layers x 2 x 2 heads x 16 x the
    pool's element size: 4 or 8 MiB), at most a tenth of free memory; a given budget is kept;
    /health and /v1/cache/stats say the same number."""
    from engine.backends import load_backend
    from engine.model.load import load_model

    auto, given = engine_factory(), engine_factory("--prompt-cache-bytes", "1MiB")
    health = get(auto.url + "/health")
    assert health["prompt_cache_budget_bytes"] == get(auto.url + "/v1/cache/stats")["budget_bytes"]
    context = load_backend("torch", load_model("tiny")).kv_bytes(health["ctx_size"])
    assert context in (4 * 2**20, 8 * 2**20)
    assert health["prompt_cache_budget_bytes"] == min(context, health["kv_budget_bytes"] // 5)
    assert get(given.url + "/health")["prompt_cache_budget_bytes"] == 2**20
    assert get(given.url + "/v1/cache/stats")["budget_bytes"] == 2**20
    off = engine_factory("--no-prompt-cache")
    assert get(off.url + "/health")["prompt_cache_budget_bytes"] is None
