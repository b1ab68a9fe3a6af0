"""Change points in a metric's history over commits: E-Divisive means (Matteson and James,
2014, the method MongoDB's performance CI uses) with a permutation test. Pure: no I/O.

The series is one value per commit (the median of its runs), in commit order, on a log scale
(a step is a ratio). Each pass finds, over every current segment, the split that maximises the
energy-distance statistic between its two sides, then keeps it only when fewer than SIG of
PERMUTATIONS shuffles within those segments give a larger maximum; a kept split cuts its
segment in two and the search goes on. On pure noise the first test is the only one made, so
the chance of naming any change point is SIG (a little more for a series of 10 or 11 values,
too short to reach it: `level`). A split that moves the median by less than
MIN_STEP is then dropped: a quiet enough series makes any shift significant, not one that
matters (docs/history.md, "Change points")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

import numpy as np

SIG = 0.005  # permutation p-value a change point must reach
PERMUTATIONS = 999  # p = (exceeding + 1) / (PERMUTATIONS + 1): a p of 0.005 allows 4
# A series of n values can give no p below 2/C(n, n//2): only a clean step at its middle and
# its mirror reach the largest statistic. Where that floor is not well under SIG (n <= 11), the
# level is FLOOR_MARGIN times the floor, up to SHORT_SIG, with more shuffles to resolve it;
# shorter series cannot name a step at all (docs/history.md, "Short histories").
FLOOR_MARGIN = 1.5
SHORT_SIG = 0.012  # the highest level a short series is tested at: 10 commits, 0.0119
SHORT_PERMUTATIONS = 9999
MIN_SIZE = 3  # commits on each side of a change point
ALPHA = 1.0  # exponent of the distance (0 < alpha < 2): 1 is the energy distance
MIN_STEP = 0.02  # a change point moves the median at least this much: a quieter series makes
# a smaller shift significant (a machine's drift between commits run one after another), not
# one that matters


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int  # the first commit of the new level
    before: float  # median of the segment before it (original scale)
    after: float  # and of the segment from it
    p_value: float

    @property
    def ratio(self) -> float:
        return self.after / self.before

    @property
    def confidence(self) -> float:
        return 1 - self.p_value


def _prefix(d: np.ndarray) -> np.ndarray:
    """P[i, j] = sum of d[:i, :j] (one row and column of zeros in front)."""
    p = np.zeros((d.shape[0] + 1, d.shape[1] + 1))
    p[1:, 1:] = d.cumsum(0).cumsum(1)
    return p


def split_statistics(x: np.ndarray, min_size: int = MIN_SIZE) -> np.ndarray:
    """Q(tau) for every split tau of `x`: the largest over every end kappa > tau of
    m*n/(m+n) * (2 E|X-Y| - E|X-X'| - E|Y-Y'|) between X = x[:tau] and Y = x[tau:kappa], each
    mean over distinct pairs (the end kappa lets a short middle segment stand out). NaN where a
    side would be under min_size."""
    n = x.size
    q = np.full(n + 1, np.nan)
    if n < 2 * min_size:
        return q
    p = _prefix(np.abs(x[:, None] - x[None, :]) ** ALPHA)
    t, k = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = (t >= min_size) & (k - t >= min_size)
    t, k = t[ok], k[ok]
    m, r = t, k - t
    within_left = p[t, t] / (m * (m - 1))  # ordered pairs: each pair counted twice
    within_right = (p[k, k] - p[t, k] - p[k, t] + p[t, t]) / (r * (r - 1))
    between = (p[t, k] - p[t, t]) / (m * r)
    stat = m * r / (m + r) * (2 * between - within_left - within_right)
    np.fmax.at(q, t, stat)
    return q


def _best(x: np.ndarray, cuts: list[int], min_size: int) -> tuple[float, int]:
    """The largest statistic over the segments between `cuts`, and where it splits."""
    best, where = -math.inf, -1
    for a, b in zip(cuts, cuts[1:], strict=False):
        q = split_statistics(x[a:b], min_size)
        if np.all(np.isnan(q)):
            continue
        i = int(np.nanargmax(q))
        if q[i] > best:
            best, where = float(q[i]), a + i
    return best, where


def smallest_p(n: int) -> float:
    """The smallest permutation p-value a series of n values can give (a clean step at its
    middle): 2 of the C(n, n//2) ways to share the values between the two halves."""
    return 2 / math.comb(n, n // 2)


def level(n: int, sig: float = SIG) -> tuple[float, int]:
    """The p-value a series of n values must reach to name a change point, and the shuffles
    that resolve it: `sig` where the series is long enough; for a short one FLOOR_MARGIN times
    its smallest p, when that is at most SHORT_SIG (10 and 11 values); else `sig`, which a
    series that short can never reach."""
    short = FLOOR_MARGIN * smallest_p(n)
    if sig < short <= SHORT_SIG:
        return short, SHORT_PERMUTATIONS
    return sig, PERMUTATIONS


def change_points(
    values: list[float],
    *,
    sig: float | None = None,
    permutations: int | None = None,
    min_size: int = MIN_SIZE,
    min_step: float = MIN_STEP,
    seed: int = 0,
) -> list[ChangePoint]:
    """The change points of a positive series, in order; [] when it holds no significant step
    of at least `min_step` (a ratio's distance from 1, either way). The level and shuffles
    are `level(len(values))`'s unless given."""
    x = np.log(np.asarray(values, dtype=float))
    if x.size < 2 * min_size or not np.all(np.isfinite(x)):
        return []
    fitted = level(x.size)
    sig, permutations = sig or fitted[0], permutations or fitted[1]
    rng = np.random.default_rng(seed)
    cuts, found = [0, x.size], {}
    while True:
        observed, where = _best(x, cuts, min_size)
        if where < 0:
            break
        exceeding, allowed = 0, math.floor(sig * (permutations + 1)) - 1
        for _ in range(permutations):
            shuffled = x.copy()
            for a, b in zip(cuts, cuts[1:], strict=False):
                shuffled[a:b] = rng.permutation(shuffled[a:b])
            exceeding += _best(shuffled, cuts, min_size)[0] >= observed
            if exceeding > allowed:  # p can no longer reach sig: stop shuffling
                break
        p = (exceeding + 1) / (permutations + 1)
        if p > sig:
            break
        found[where] = p
        cuts = sorted([*cuts, where])
    return sized(values, found, min_step)


def sized(values: list[float], found: dict[int, float], min_step: float) -> list[ChangePoint]:
    """The significant splits (index -> p) that move the median between their neighbouring
    splits by at least `min_step`: the smallest step under it is dropped and the rest measured
    again without it, until every one left matters."""
    kept = dict(found)
    while True:
        cuts = [0, *sorted(kept), len(values)]
        points = [
            ChangePoint(w, median(values[a:w]), median(values[w:b]), kept[w])
            for a, w, b in zip(cuts, cuts[1:], cuts[2:], strict=False)
        ]
        small = [c for c in points if abs(math.log(c.ratio)) < math.log1p(min_step)]
        if not small:
            return points
        del kept[min(small, key=lambda c: abs(math.log(c.ratio))).index]
