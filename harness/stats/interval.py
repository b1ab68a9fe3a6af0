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


ORDER_FROM_ROUNDS = 6  # an order term is fitted from 6 rounds, with at least 3 in each order
ORDER_EACH = 3


def _se(p: Paired) -> float:
    """The standard error of two or more rounds (each caller has checked there are two)."""
    if p.se is None:
        raise ValueError("an interval needs two rounds")
    return p.se


def log_ratios(base: list[float], head: list[float]) -> np.ndarray:
    b, h = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if b.shape != h.shape:
        raise ValueError(f"unpaired rounds: {b.size} base vs {h.size} head values")
    if np.any(b <= 0) or np.any(h <= 0):
        raise ValueError("ratio of non-positive values is undefined")
    return np.log(h / b)


@dataclass(frozen=True, slots=True)
class Paired:
    """The rounds' d = ln(head/base) as an interval needs them. With `later` (per round, True
    when head was measured after base) and enough rounds in each order, the order effect is
    fitted as a term (d = delta + order x pi, order -1/+1) and taken out of d: `d` is then
    d - pi x order, whose mean is delta, the change with the order averaged out, and whose
    spread is the residuals' on one degree of freedom fewer (the AB/BA crossover's analysis)."""

    d: np.ndarray
    df: int  # of the spread: rounds - 1, or rounds - 2 with the order term
    se_scale: float  # the centre's standard error is spread x se_scale
    order_effect: float | None  # pi x 2, ln: head measured second against first; None unfitted

    @property
    def mean(self) -> float:
        return float(self.d.mean())

    @property
    def spread(self) -> float | None:
        if self.df < 1:
            return None
        return float(math.sqrt(((self.d - self.d.mean()) ** 2).sum() / self.df))

    @property
    def se(self) -> float | None:
        return None if self.spread is None else self.spread * self.se_scale


def paired_logs(base: list[float], head: list[float], later: list[bool] | None = None) -> Paired:
    d = log_ratios(base, head)
    r = d.size
    plain = Paired(d, r - 1, 1 / math.sqrt(r) if r else math.inf, None)
    if later is None or len(later) != r or r < ORDER_FROM_ROUNDS:
        return plain
    x = np.where(np.asarray(later, dtype=bool), 1.0, -1.0)
    if min((x > 0).sum(), (x < 0).sum()) < ORDER_EACH:
        return plain
    xc = x - x.mean()
    pi = float((xc * (d - d.mean())).sum() / (xc**2).sum())
    # the intercept's standard error in a regression on x: sqrt(1/r + mean(x)^2 / Sxx)
    scale = math.sqrt(1 / r + x.mean() ** 2 / float((xc**2).sum()))
    return Paired(d - pi * x, r - 2, scale, 2 * pi)


def ratio_interval(
    p: Paired, *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> RatioInterval:
    """Estimate exp(mean d) and its 95% CI; t-interval below 10 rounds. `p` is the rounds'
    d, with the order effect taken out where it could be fitted (`paired_logs`)."""
    r, mean = p.d.size, p.mean
    if r == 0:
        raise ValueError("no rounds to compare")
    if r < 2:
        return RatioInterval(math.exp(mean), None, None, None, Method.T)
    if r < BOOTSTRAP_FROM_ROUNDS:
        half = t_quantile(0.5 + CONFIDENCE / 2, p.df) * _se(p)
        lo, hi, method = mean - half, mean + half, Method.T
    else:
        from scipy import stats  # 0.8 s to import: only a bootstrap pays it

        boot = stats.bootstrap(
            (p.d,),
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


def t_bounds(p: Paired, alpha: float) -> tuple[float, float] | None:
    """One-sided (1 - alpha) t-bounds on the ratio, low and high: the evidence a sequential
    REGRESSION needs (the t-bound at every R: a bootstrap cannot resolve a 0.1% tail from ten
    rounds). None below two rounds or for a degenerate alpha."""
    if p.d.size < 2 or not 0 < alpha < 0.5:
        return None
    half = t_quantile(1 - alpha, p.df) * _se(p)
    return math.exp(p.mean - half), math.exp(p.mean + half)


POWER = 0.8


def detectable_shift(
    p: Paired, alpha: float, log_limit: float, power: float = POWER
) -> float | None:
    """The true ln-shift (towards worse) this look calls a REGRESSION with probability `power`
    at the rounds' observed spread: its bound must clear 1 (t(1-alpha) standard errors) and its
    estimate the tolerance's bad limit (`log_limit`, e.g. ln 1.15)."""
    if p.d.size < 2 or not 0 < alpha < 0.5:
        return None
    t_power, t_alpha = t_quantile(power, p.df), t_quantile(1 - alpha, p.df)
    se = _se(p)
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
