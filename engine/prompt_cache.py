"""PromptCache: KV of past prompts, reused for the longest shared prefix; byte budget, LRU."""

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np


@dataclass
class Entry:
    tokens: np.ndarray
    kv: object  # backend-specific saved prefix
    nbytes: int


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class PromptCache:
    def __init__(self, budget_bytes: int, min_tokens: int = 16):
        self.budget = budget_bytes
        self.min_tokens = min_tokens
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.nbytes = 0
        self.hits = self.misses = self.tokens_reused = 0
        self._next_key = 0

    def match(self, prompt: list[int]) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with prompt and how many tokens it would give
        (at most len(prompt) - 1: the last token must run to produce logits); (None, 0) below
        min_tokens. Pure: no statistics, no LRU touch (admission plans with it)."""
        _, best, n = self._best(prompt)
        return best, n

    def lookup(self, prompt: list[int]) -> tuple[Entry | None, int]:
        """`match`, counted as a hit or a miss, the entry made most recently used."""
        key, best, n = self._best(prompt)
        if best is None:
            self.misses += 1
            return None, 0
        self.entries.move_to_end(key)
        self.hits += 1
        self.tokens_reused += n
        return best, n

    def _best(self, prompt: list[int]) -> tuple[int | None, Entry | None, int]:
        tokens = np.asarray(prompt)
        best_key, best, best_n = None, None, 0
        for key, e in self.entries.items():
            n = common_prefix(e.tokens, tokens)
            if n > best_n:
                best_key, best, best_n = key, e, n
        best_n = min(best_n, len(prompt) - 1)
        if best is None or best_n < self.min_tokens:
            return None, None, 0
        return best_key, best, best_n

    def covers(self, prompt: list[int]) -> bool:
        tokens = np.asarray(prompt)
        return any(common_prefix(e.tokens, tokens) == len(tokens) for e in self.entries.values())

    def insert(self, prompt: list[int], kv: object, nbytes: int) -> bool:
        """Keep a prompt's KV. The caller asks `covers` first, before it copies the KV out."""
        if len(prompt) < self.min_tokens or nbytes > self.budget:
            return False
        while self.nbytes + nbytes > self.budget:
            _, old = self.entries.popitem(last=False)
            self.nbytes -= old.nbytes
        self.entries[self._next_key] = Entry(np.asarray(prompt), kv, nbytes)
        self._next_key += 1
        self.nbytes += nbytes
        return True

    def stats(self) -> dict:
        return {
            "entries": len(self.entries),
            "bytes": self.nbytes,
            "budget_bytes": self.budget,
            "hits": self.hits,
            "misses": self.misses,
            "tokens_reused": self.tokens_reused,
        }
