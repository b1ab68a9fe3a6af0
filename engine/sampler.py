"""Token sampling on float32 logits: greedy, or temperature with nucleus (top-p), seeded."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self):
        assert self.temperature >= 0 and 0 < self.top_p <= 1


class Sampler:
    """One per sequence, so a seeded request draws the same tokens whatever it is batched with."""

    def __init__(self, params: SamplingParams):
        self.params = params
        self.rng = np.random.default_rng(params.seed)

    def __call__(self, logits: np.ndarray) -> int:
        if self.params.temperature == 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / self.params.temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if self.params.top_p < 1:
            order = np.argsort(-p)
            # keep the smallest prefix whose mass reaches top_p (always at least one token)
            keep = np.cumsum(p[order]) - p[order] < self.params.top_p
            p_top = np.zeros_like(p)
            p_top[order[keep]] = p[order[keep]]
            p = p_top / p_top.sum()
        return int(self.rng.choice(len(p), p=p))
