"""The scheduling rules at their boundaries (the same functions the scheduler calls)."""

import pytest

from engine.config import default_token_cap
from engine.policy import (
    Cohort,
    Tick,
    TickState,
    admission_rows,
    batched_window_admits,
    decide_tick,
    default_kv_budget,
    default_prompt_cache_budget,
    drain_cohort,
    kv_admits,
)


def test_default_budget_is_twice_the_tight_product():
    assert default_token_cap(4, 512) == 4096
    assert default_token_cap(1, 512) == 1024


def test_exact_boundary_admits_and_one_token_more_spills():
    assert batched_window_admits(rows=3, cur_max=512, next_len=512, token_cap=2048)
    assert not batched_window_admits(rows=3, cur_max=512, next_len=513, token_cap=2048)
    assert not batched_window_admits(rows=3, cur_max=513, next_len=500, token_cap=2048)


def test_cohort_fits():
    assert drain_cohort([520] * 4, 4, 4096, 512) == Cohort(4, "batched", 0)


def test_cohort_spills_the_seed_boundary_row():
    assert drain_cohort([520] * 4, 4, 2048, 512) == Cohort(3, "batched", 1)


def test_cohort_stops_at_the_first_row_that_does_not_fit():
    # FIFO: the short row behind the long one waits too
    assert drain_cohort([300, 300, 1500, 10], 4, 2048, 512) == Cohort(2, "batched", 2)


def test_uncapped_takes_every_row():
    assert drain_cohort([3000] * 4, 4, 0, 512) == Cohort(4, "batched", 0)


def test_long_head_skips_batching_and_prefills_chunked():
    assert drain_cohort([3000, 10, 10], 4, 4096, 512) == Cohort(1, "chunked", 0)
    assert drain_cohort([2049, 10], 4, 4096, 512) == Cohort(1, "chunked", 0)
    assert drain_cohort([2048, 10], 4, 4096, 512) == Cohort(2, "batched", 0)


def test_a_lone_row_takes_single_or_chunked_by_the_chunk():
    assert drain_cohort([512], 4, 4096, 512) == Cohort(1, "single", 0)
    assert drain_cohort([513], 4, 4096, 512) == Cohort(1, "chunked", 0)
    assert drain_cohort([100, 100], 1, 4096, 512) == Cohort(1, "single", 0)


def test_admission_rows():
    assert admission_rows(4, 4, 0) == 4
    assert admission_rows(32, 32, 4) == 4
    assert admission_rows(4, 2, 0) == 2
    assert admission_rows(4, 2, 3) == 2


def test_kv_budget():
    assert default_kv_budget(10_000) == 5_000
    assert kv_admits(60, 40, 100) and not kv_admits(61, 40, 100) and kv_admits(10**12, 1, None)


def state(**kw) -> TickState:
    base = dict(
        queued=0,
        running=0,
        parked=False,
        can_admit=True,
        head_needs_chunks=False,
        decode_ticks_since_grant=0,
        grant_interval=16,
        admit_rows=4,
        head_wait_s=1.0,
        batch_window_s=0.01,
    )
    return TickState(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "tick"),
    [
        (dict(), Tick.IDLE),
        (dict(queued=2), Tick.ADMIT),
        (dict(queued=2, head_wait_s=0.001), Tick.WAIT),
        (dict(queued=4, head_wait_s=0.001), Tick.ADMIT),  # a full cohort does not wait
        (dict(queued=2, running=2), Tick.ADMIT),
        (dict(queued=2, running=2, can_admit=False), Tick.DECODE),
        (dict(running=2), Tick.DECODE),
        (dict(parked=True), Tick.PREFILL_CHUNK),
        (dict(parked=True, running=3, decode_ticks_since_grant=15), Tick.DECODE),
        (dict(parked=True, running=3, decode_ticks_since_grant=16), Tick.PREFILL_CHUNK),
        # admission between a parked prompt's chunks, unless the head needs parking itself
        (dict(parked=True, running=3, queued=5), Tick.ADMIT),
        (dict(parked=True, queued=1), Tick.ADMIT),
        (dict(parked=True, queued=1, head_needs_chunks=True), Tick.PREFILL_CHUNK),
        (dict(parked=True, running=3, queued=5, head_needs_chunks=True), Tick.DECODE),
        (dict(parked=True, running=3, queued=5, can_admit=False), Tick.DECODE),
    ],
)
def test_tick_decisions(kw, tick):
    assert decide_tick(state(**kw)) is tick


def test_the_prompt_cache_budget_is_one_context_of_kv_at_most_a_tenth_of_free_memory():
    assert default_prompt_cache_budget(188 * 2**20, 20 * 2**30) == 188 * 2**20
    assert default_prompt_cache_budget(4 * 2**30, 8 * 2**30) == 8 * 2**30 // 10
