"""Sequential stopping: the schedule of looks at the rounds (3, 5, 7, ... up to the last), the
share of the gate's false-regression budget each look may spend, and when to stop.
Pure: no I/O (docs/statistics.md, "Sequential stopping", says why these rules)."""

from __future__ import annotations

from dataclasses import dataclass

GATE_ALPHA = 0.01  # P(any REGRESSION on an A/A), every gated metric and every look together
LOOK_STEP = 2  # rounds added between looks (keeps the ABBA rotation balanced)
SPENDING_RHO = 2.0  # alpha spent by the look at R rounds: GATE_ALPHA * (R / max)^rho
AUTO_MAX_ROUNDS = 41  # `--max-rounds auto`: the last look the measured noise may move out to


@dataclass(frozen=True, slots=True)
class Schedule:
    """The looks a job takes; a look at R rounds may call a REGRESSION only at its own alpha.
    `spent` holds the cumulative alpha of the first looks, fixed when the plan was moved
    (`replanned`); the looks after them spend the rest by the spending rule."""

    looks: tuple[int, ...]
    alpha: float = GATE_ALPHA
    step: int = LOOK_STEP
    spent: tuple[float, ...] = ()

    @classmethod
    def plan(
        cls, rounds: int, max_rounds: int, alpha: float = GATE_ALPHA, block: int = 1
    ) -> Schedule:
        """Looks at rounds, rounds + 2, ... and always at max_rounds (a single look when equal).
        With `block` > 1 (rounds that rotate arms over devices) every look is at whole blocks:
        the counts are rounded up to a multiple of it and the looks step by it."""
        if rounds < 1 or max_rounds < rounds:
            raise ValueError(f"need 1 <= rounds <= max_rounds, got {rounds} and {max_rounds}")
        if block > 1:
            rounds, max_rounds = (
                -(-n // block) * block for n in (max(rounds, 2 * block), max_rounds)
            )
            max_rounds = max(rounds, max_rounds)
        step = block if block > 1 else LOOK_STEP
        return cls(_looks(rounds, max_rounds, step), alpha, step)

    @classmethod
    def single(cls, rounds: int, alpha: float = GATE_ALPHA) -> Schedule:
        """One look at a fixed number of rounds (saved runs compared offline)."""
        return cls((rounds,), alpha)

    def cumulative(self, rounds: int) -> float:
        """The alpha spent by the look at `rounds` and every look before it: alpha * (R /
        R_max)^rho (O'Brien-Fleming-like: little early, most at the end); after a replan the
        rest of alpha by the same curve over the looks that remain."""
        k = len(self.spent)
        if k and rounds <= self.looks[k - 1]:
            return next(s for r, s in zip(self.looks, self.spent, strict=False) if r >= rounds)
        start, before = (self.looks[k - 1], self.spent[-1]) if k else (0, 0.0)
        last = self.looks[-1]
        share = ((rounds - start) / (last - start)) ** SPENDING_RHO if last > start else 1.0
        return before + (self.alpha - before) * min(share, 1.0)

    def look_alpha(self, rounds: int) -> float:
        """The alpha the look at `rounds` spends: the cumulative spending since the previous
        look. A round count that is not a look gets the next look's share."""
        at = next((r for r in self.looks if r >= rounds), self.looks[-1])
        before = max((r for r in self.looks if r < at), default=0)
        return self.cumulative(at) - (self.cumulative(before) if before else 0.0)

    def metric_alpha(self, rounds: int, metrics: int) -> float:
        """Per-metric one-sided alpha at this look: Bonferroni over the interval-gated metrics."""
        return self.look_alpha(rounds) / max(metrics, 1)

    def replanned(self, done: int, last: int) -> Schedule:
        """The looks after `done` rounds moved so that the last is at `last`: further out when
        the noise measured needs more rounds, nearer when a time budget holds fewer. What the
        looks up to `done` spent stays spent and the total stays alpha; neither reason depends
        on the head/base difference, so the false-regression rate holds."""
        kept = [r for r in self.looks if r <= done]
        spent = tuple(self.cumulative(r) for r in kept)
        if not kept:
            first = min(self.looks[0], last)
            return Schedule(_looks(first, last, self.step), self.alpha, self.step)
        later = _looks(kept[-1] + self.step, last, self.step) if last > kept[-1] else ()
        return Schedule((*kept, *later), self.alpha, self.step, spent)

    def is_look(self, rounds: int) -> bool:
        return rounds in self.looks

    def next_look(self, rounds: int) -> int | None:
        return next((r for r in self.looks if r > rounds), None)

    def to_dict(self) -> dict:
        out = {"looks": list(self.looks), "alpha": self.alpha}
        if self.spent:
            out["spent"] = list(self.spent)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Schedule:
        looks = tuple(data["looks"])
        step = looks[1] - looks[0] if len(looks) > 1 else LOOK_STEP
        return cls(looks, data.get("alpha", GATE_ALPHA), step, tuple(data.get("spent", ())))


def _looks(first: int, last: int, step: int) -> tuple[int, ...]:
    looks = list(range(first, last + 1, step)) if first <= last else [last]
    if looks[-1] != last:
        looks.append(last)
    return tuple(looks)
