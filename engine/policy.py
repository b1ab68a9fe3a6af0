"""Scheduling rules as pure functions of small state records, so tests exercise the real rule."""

from dataclasses import dataclass
from enum import Enum


class Tick(Enum):
    IDLE = "idle"
    WAIT = "wait"  # idle engine holding its first arrival briefly for companions
    ADMIT = "admit"
    DECODE = "decode"
    PREFILL_CHUNK = "prefill_chunk"


@dataclass(frozen=True)
class TickState:
    queued: int  # requests waiting for admission
    running: int  # sequences decoding
    parked: bool  # a chunked prefill is part-way through its prompt
    can_admit: bool  # the queue head fits a free slot and the KV budget
    head_needs_chunks: bool  # the queue head's uncached prompt is longer than one chunk
    decode_ticks_since_grant: int
    grant_interval: int
    admit_rows: int  # rows an ADMIT tick could take now
    head_wait_s: float  # how long the queue head has waited
    batch_window_s: float


def decide_tick(s: TickState) -> Tick:
    if s.parked:
        # admission goes on between a long prompt's chunks (vLLM's chunked prefill, Sarathi-
        # Serve): a short request waits one chunk, not the whole prompt; one prompt is parked
        # at a time, so a head that needs chunks of its own waits for it
        if s.queued and s.can_admit and not s.head_needs_chunks:
            return Tick.ADMIT
        if s.running and s.decode_ticks_since_grant < s.grant_interval:
            return Tick.DECODE
        return Tick.PREFILL_CHUNK
    if not s.queued and not s.running:
        return Tick.IDLE
    if s.running:
        return Tick.ADMIT if s.queued and s.can_admit else Tick.DECODE
    if s.queued < s.admit_rows and s.head_wait_s < s.batch_window_s:
        return Tick.WAIT
    return Tick.ADMIT


@dataclass(frozen=True)
class Cohort:
    rows: int  # queue rows taken this tick, from the head
    path: str  # "batched" (one padded forward), "single" (one forward), "chunked"
    spilled: int  # rows the token cap left queued that the row limit would have taken


def batched_window_admits(rows: int, cur_max: int, next_len: int, token_cap: int) -> bool:
    """May a cohort of `rows` padded to `cur_max` take one more row? Padded tokens <= cap."""
    return token_cap == 0 or (rows + 1) * max(cur_max, next_len) <= token_cap


def drain_cohort(lengths: list[int], max_rows: int, token_cap: int, chunk_size: int) -> Cohort:
    """FIFO drain of cold prompts (their lengths, head first) into this tick's prefill.

    The head always goes (no livelock). A head too long to share a two-row batch under the cap
    prefills alone, chunked if longer than a chunk. The drain stops at the first row that
    does not fit.
    """
    assert lengths and max_rows >= 1
    head = lengths[0]
    alone = "chunked" if head > chunk_size else "single"
    if token_cap and 2 * head > token_cap:
        return Cohort(1, alone, 0)
    rows, cur_max = 1, head
    limit = min(max_rows, len(lengths))
    while rows < limit and batched_window_admits(rows, cur_max, lengths[rows], token_cap):
        cur_max = max(cur_max, lengths[rows])
        rows += 1
    return Cohort(rows, "batched" if rows > 1 else alone, limit - rows)


def admission_rows(max_batch_prefill: int, free_slots: int, prefill_max_seqs: int) -> int:
    """Rows one ADMIT tick may take; prefill_max_seqs 0 means no per-tick cap."""
    rows = min(max_batch_prefill, free_slots)
    return min(rows, prefill_max_seqs) if prefill_max_seqs else rows


def default_kv_budget(available_bytes: int) -> int:
    """`--kv-cache-budget auto`: half the memory free after the weights are loaded."""
    return available_bytes // 2


def default_prompt_cache_budget(context_kv_bytes: int, available_bytes: int) -> int:
    """`--prompt-cache-bytes auto`: the KV of one full context (what llama-server's slots hold
    of past prompts), at most a tenth of the memory free after loading: it follows the model
    and the machine (a fixed 2 GiB held 794 MB of a 135M model's prompts after an hour)."""
    return min(context_kv_bytes, available_bytes // 10)


def budgets(
    kv_setting: str | int | None, cache_setting: str | int, context_kv: int, free: int
) -> tuple[int | None, int]:
    """The KV budget and the prompt cache's, "auto" resolved against `free` bytes and the KV
    bytes of one full context."""
    kv = default_kv_budget(free) if kv_setting == "auto" else kv_setting
    cache = (
        default_prompt_cache_budget(context_kv, free) if cache_setting == "auto" else cache_setting
    )
    return kv, cache


def kv_admits(live_bytes: int, need_bytes: int, budget: int | None) -> bool:
    return budget is None or live_bytes + need_bytes <= budget
