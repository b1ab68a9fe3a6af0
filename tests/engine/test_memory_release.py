"""release_freed_memory hands the heap's free pages back to the OS (the engine calls it once
its load's large temporaries are freed)."""

import platform
import sys

import pytest

from engine.memory import release_freed_memory, rss_bytes


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's",
)
def test_freed_heap_pages_leave_the_rss():
    blocks = [bytearray(64 * 1024) for _ in range(3000)]  # ~190 MB on the heap, touched
    pin = bytearray(64 * 1024)  # above them: glibc's own top trimming cannot return them
    del blocks
    before = rss_bytes()
    release_freed_memory()
    assert before - rss_bytes() > 100 * 2**20
    del pin


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RSS from /proc")
def test_the_kv_pool_holds_only_written_tokens_and_gives_a_removed_sequences_back():
    """Reserved for 4 sequences of 8,192 tokens (4 x 8,192 x 30 layers x 2 x 3 heads x 64 x 2 B
    = 720 MiB of address space), the pool is resident only where tokens were written, and a
    removed sequence's pages leave the RSS."""
    import torch

    from engine.backends.torch.kv_pool import KVPool
    from engine.model.args import ModelArgs

    args = ModelArgs(hidden_size=576, num_hidden_layers=30, intermediate_size=1536,
                     num_attention_heads=9, num_key_value_heads=3, vocab_size=100)  # fmt: skip
    pool = KVPool(args, torch.bfloat16, torch.device("cpu"))
    base = rss_bytes()
    pool.reserve(4, 8192)
    assert rss_bytes() - base < 16 * 2**20  # nothing written: nothing resident
    mib = 2**20
    caches = [pool.add(8192) for _ in range(2)]
    for c in caches:
        c.k[:, :, :4000] = 1.0  # 4,000 tokens: 30 x 3 x 4000 x 64 x 2 B = 44 MiB of K
        c.v[:, :, :4000] = 1.0
    grown = rss_bytes() - base
    assert 150 * mib < grown < 200 * mib, grown / mib  # two sequences' K and V: 176 MiB
    pool.remove(caches[0])
    assert grown - (rss_bytes() - base) > 80 * mib  # its 88 MiB handed back
    again = pool.add(8192)  # the freed slot reads zeros, as a fresh one
    assert again.slot == caches[0].slot and not again.k.any() and not again.v.any()
    assert torch.equal(caches[1].k[:, :, :4000], torch.ones_like(caches[1].k[:, :, :4000]))
