"""Token sampling on float32 logits: greedy, or temperature with nucleus (top-p), seeded."""

import math
from dataclasses import dataclass

import numpy as np

# Below this a temperature divides logits into overflow; treat it as greedy, as vLLM does.
GREEDY_BELOW = 1e-5


class InjectedFault(RuntimeError):
    """Raised by a sampler built with fault=True: the test-only poison (docs/engine.md)."""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self):
        assert math.isfinite(self.temperature) and self.temperature >= 0
        assert 0 < self.top_p <= 1

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW


class Sampler:
    """One per sequence, so a seeded request draws the same tokens whatever it is batched with."""

    def __init__(self, params: SamplingParams, fault: bool = False):
        self.params = params
        self.fault = fault
        self.rng = np.random.default_rng(params.seed)

    def __call__(self, logits: np.ndarray) -> int:
        if self.fault:
            raise InjectedFault("injected sampler fault (ENGINE_TEST_FAULT_MARKER)")
        if self.params.greedy:  # argmax as after nan_to_num below, without its float64 copy
            nan = np.isnan(logits)
            return int(np.argmax(np.where(nan, -np.inf, logits) if nan.any() else logits))
        # a non-finite logit (a broken forward) must not become a NaN probability
        logits = np.nan_to_num(
            logits.astype(np.float64), nan=-np.inf, posinf=np.finfo("d").max, neginf=-np.inf
        )
        if self.params.greedy or not np.isfinite(logits.max()):
            return int(np.argmax(logits))
        with np.errstate(over="ignore"):  # an overflow goes to inf, handled just below
            z = logits / self.params.temperature
            if not np.isfinite(z.max()):
                return int(np.argmax(logits))
            p = np.exp(z - z.max())  # z - max(z) <= 0: every term in [0, 1], the argmax's is 1
        p /= p.sum()
        if self.params.top_p < 1:
            order = np.argsort(-p)
            # keep the smallest prefix whose mass reaches top_p (always at least one token)
            keep = np.cumsum(p[order]) - p[order] < self.params.top_p
            p_top = np.zeros_like(p)
            p_top[order[keep]] = p[order[keep]]
            p = p_top / p_top.sum()
        return int(self.rng.choice(len(p), p=p))
