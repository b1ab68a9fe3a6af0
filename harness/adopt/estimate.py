"""What a gate costs, from one measured cold run of its suite: a round starts and measures every
arm once (one at a time, together, or at once on devices of their own), a gate runs rounds of
them after building each arm's commit."""

from __future__ import annotations

from dataclasses import dataclass

ONE_AT_A_TIME, TOGETHER, AT_ONCE = "one-at-a-time", "together", "at once"


@dataclass(frozen=True, slots=True)
class Estimate:
    round_s: float  # one round of every arm
    first_look_s: float  # builds and the rounds before the first look
    most_s: float  # builds and every round up to the last look


def round_seconds(run_s: float, startup_s: float, arms: int, servers: str) -> float:
    """One round: one at a time, every arm's whole cold run in turn; together, the arms start at
    once (one start's wait) and are measured in turn; at once, each on its own device."""
    if servers == AT_ONCE:
        return run_s
    if servers == TOGETHER:
        return startup_s + arms * max(0.0, run_s - startup_s)
    return arms * run_s


def estimate(
    run_s: float,
    startup_s: float,
    servers: str,
    rounds: int,
    max_rounds: int,
    build_s: float = 0.0,
    arms: int = 2,
) -> Estimate:
    """The gate's time for `rounds` and for `max_rounds` rounds, every arm's build included."""
    one = round_seconds(run_s, startup_s, arms, servers)
    builds = arms * build_s
    return Estimate(one, builds + rounds * one, builds + max_rounds * one)
