"""Sequential stopping: the fixed schedule of looks at the rounds (3, 5, 7, ... up to the cap),
the share of the gate's false-regression budget each look may spend, and when to stop.
Pure: no I/O (docs/statistics.md, "Sequential stopping", says why these rules)."""

from __future__ import annotations

from dataclasses import dataclass

GATE_ALPHA = 0.01  # P(any REGRESSION on an A/A), every gated metric and every look together
LOOK_STEP = 2  # rounds added between looks (keeps the ABBA rotation balanced)
SPENDING_RHO = 2.0  # alpha spent by the look at R rounds: GATE_ALPHA * (R / max)^rho


@dataclass(frozen=True, slots=True)
class Schedule:
    """The looks a job takes; a look at R rounds may call a REGRESSION only at its own alpha."""

    looks: tuple[int, ...]
    alpha: float = GATE_ALPHA

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
        looks = list(range(rounds, max_rounds + 1, block if block > 1 else LOOK_STEP))
        if looks[-1] != max_rounds:
            looks.append(max_rounds)
        return cls(tuple(looks), alpha)

    @classmethod
    def single(cls, rounds: int, alpha: float = GATE_ALPHA) -> Schedule:
        """One look at a fixed number of rounds (saved runs compared offline)."""
        return cls((rounds,), alpha)

    def look_alpha(self, rounds: int) -> float:
        """The alpha the look at `rounds` spends: the increase of the cumulative spending
        function alpha * (R / R_max)^rho since the previous look (O'Brien-Fleming-like: little
        early, most at the end). A round count that is not a look gets the next look's share."""
        last = self.looks[-1]
        at = next((r for r in self.looks if r >= rounds), last)
        before = max((r for r in self.looks if r < at), default=0)
        return self.alpha * ((at / last) ** SPENDING_RHO - (before / last) ** SPENDING_RHO)

    def metric_alpha(self, rounds: int, metrics: int) -> float:
        """Per-metric one-sided alpha at this look: Bonferroni over the interval-gated metrics."""
        return self.look_alpha(rounds) / max(metrics, 1)

    def is_look(self, rounds: int) -> bool:
        return rounds in self.looks

    def next_look(self, rounds: int) -> int | None:
        return next((r for r in self.looks if r > rounds), None)

    def to_dict(self) -> dict:
        return {"looks": list(self.looks), "alpha": self.alpha}

    @classmethod
    def from_dict(cls, data: dict) -> Schedule:
        return cls(tuple(data["looks"]), data.get("alpha", GATE_ALPHA))
