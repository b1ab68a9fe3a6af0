"""Serving flags: flag > ENGINE_<FLAG> env > derived default, and clear errors."""

import pytest

from engine.config import ConfigError, parse_bytes, parse_kv_budget, resolve_config


def test_defaults_and_derived_token_cap():
    c = resolve_config({}, {})
    assert (c.parallel, c.max_batch_prefill, c.prefill_chunk_size) == (4, 4, 512)
    assert c.token_cap == 4096 and c.kv_cache_budget == "auto" and c.prompt_cache


def test_cap_derives_from_the_resolved_inputs():
    assert resolve_config({"prefill_chunk_size": 256}, {}).token_cap == 2048
    assert resolve_config({}, {"ENGINE_MAX_BATCH_PREFILL": "2"}).token_cap == 2048


def test_flag_beats_env_beats_default():
    env = {"ENGINE_MAX_BATCH_PREFILL_TOKENS": "2048"}
    assert resolve_config({}, env).token_cap == 2048
    assert resolve_config({"max_batch_prefill_tokens": 0}, env).token_cap == 0
    assert resolve_config({"max_batch_prefill_tokens": None}, env).token_cap == 2048


def test_env_booleans_and_sizes():
    c = resolve_config({}, {"ENGINE_PROMPT_CACHE": "0", "ENGINE_KV_CACHE_BUDGET": "1GiB"})
    assert not c.prompt_cache and c.kv_cache_budget == 1024**3
    assert parse_kv_budget("none") is None and parse_kv_budget("off") is None
    assert parse_bytes("2GiB") == 2 * 1024**3 and parse_bytes("512") == 512


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        ({"parallel": 0}, {}, "--parallel"),
        ({}, {"ENGINE_PREFILL_CHUNK_SIZE": "big"}, "--prefill-chunk-size"),
        ({"kv_cache_budget": "lots"}, {}, "--kv-cache-budget"),
        ({"max_batch_prefill_tokens": -1}, {}, "--max-batch-prefill-tokens"),
        ({"step_trace": "/no/such/folder/steps.jsonl"}, {}, "--step-trace: no folder"),
    ],
)
def test_bad_values_name_the_flag(flags, env, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(flags, env)
