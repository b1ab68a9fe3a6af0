"""Confidence interval for the head/base ratio of paired rounds: a paired t-interval on
d = ln(head/base) for few rounds, a percentile bootstrap over rounds for many."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.results.metrics import Method

BOOTSTRAP_FROM_ROUNDS = 10
BOOTSTRAP_RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """exp(mean d) with its 95% CI; `mde` is the CI half-width as a ratio (exp(half-width)):
    a true change smaller than that cannot be told from the observed noise."""

    ratio: float
    ci_low: float | None
    ci_high: float | None
    mde: float | None
    method: Method


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (scipy.stats.t.ppf); from scipy.special, which imports in a third
    of scipy.stats's time, and only when a comparison needs it."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def log_ratios(base: list[float], head: list[float]) -> np.ndarray:
    b, h = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if b.shape != h.shape:
        raise ValueError(f"unpaired rounds: {b.size} base vs {h.size} head values")
    if np.any(b <= 0) or np.any(h <= 0):
        raise ValueError("ratio of non-positive values is undefined")
    return np.log(h / b)


def ratio_interval(
    base: list[float], head: list[float], *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> RatioInterval:
    """Estimate exp(mean ln(head/base)) and its 95% CI; t-interval below 10 rounds."""
    d = log_ratios(base, head)
    r = d.size
    if r == 0:
        raise ValueError("no rounds to compare")
    mean = float(d.mean())
    if r < 2:
        return RatioInterval(math.exp(mean), None, None, None, Method.T)
    if r < BOOTSTRAP_FROM_ROUNDS:
        half = t_quantile(0.5 + CONFIDENCE / 2, r - 1) * float(d.std(ddof=1)) / math.sqrt(r)
        lo, hi, method = mean - half, mean + half, Method.T
    else:
        from scipy import stats  # 0.8 s to import: only a bootstrap pays it

        boot = stats.bootstrap(
            (d,),
            np.mean,
            n_resamples=resamples,
            confidence_level=CONFIDENCE,
            method="percentile",
            vectorized=True,
            rng=np.random.default_rng(seed),
        )
        lo, hi = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
        half, method = (hi - lo) / 2, Method.BOOTSTRAP
    return RatioInterval(math.exp(mean), math.exp(lo), math.exp(hi), math.exp(half), method)


def t_bounds(base: list[float], head: list[float], alpha: float) -> tuple[float, float] | None:
    """One-sided (1 - alpha) t-bounds on the ratio, low and high: the evidence a sequential
    REGRESSION needs (the t-bound at every R: a bootstrap cannot resolve a 0.1% tail from ten
    rounds). None below two rounds or for a degenerate alpha."""
    d = log_ratios(base, head)
    r = d.size
    if r < 2 or not 0 < alpha < 0.5:
        return None
    mean = float(d.mean())
    half = t_quantile(1 - alpha, r - 1) * float(d.std(ddof=1)) / math.sqrt(r)
    return math.exp(mean - half), math.exp(mean + half)


POWER = 0.8


def detectable_shift(
    base: list[float], head: list[float], alpha: float, log_limit: float, power: float = POWER
) -> float | None:
    """The true ln-shift (towards worse) this look calls a REGRESSION with probability `power`
    at the rounds' observed spread: its bound must clear 1 (t(1-alpha) standard errors) and its
    estimate the tolerance's bad limit (`log_limit`, e.g. ln 1.15)."""
    d = log_ratios(base, head)
    r = d.size
    if r < 2 or not 0 < alpha < 0.5:
        return None
    se = float(d.std(ddof=1) / math.sqrt(r))
    t_power = t_quantile(power, r - 1)
    t_alpha = t_quantile(1 - alpha, r - 1)
    return max((t_alpha + t_power) * se, log_limit + t_power * se)


def rounds_to_pass(
    spread: float, log_limit: float, power: float = POWER, most: int = 1000
) -> int | None:
    """The rounds after which an unchanged head PASSes with probability `power` at this
    per-round spread (sd of ln(head/base)): the 95% interval's upper end, an estimate
    t(power) standard errors high plus its t(0.975) half-width, falls under the tolerance's
    limit (`log_limit`, e.g. ln 1.05). None when even `most` rounds do not."""
    if not log_limit > 0 or not math.isfinite(spread) or spread < 0:
        return None
    from scipy.special import stdtrit

    r = np.arange(2, most + 1)
    t = stdtrit(r - 1, 0.5 + CONFIDENCE / 2) + stdtrit(r - 1, power)
    fits = np.nonzero(t * spread / np.sqrt(r) <= log_limit)[0]
    return int(r[fits[0]]) if fits.size else None
