"""The words a result ends in: each metric's verdict, the overall verdict and the exit code it
maps to (the product: 0 pass, 1 regression, 2 invalid), and what each code means."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    PASS = "PASS"
    IMPROVEMENT = "IMPROVEMENT"
    INCONCLUSIVE = "INCONCLUSIVE"
    REGRESSION = "REGRESSION"
    NA = "n/a"


INVALID = "INVALID"
MOST_ROUNDS = 1000  # a plan needing more rounds than this is said as "more than" it
EXIT_CODES = {"PASS": 0, "IMPROVEMENT": 0, "INCONCLUSIVE": 0, "REGRESSION": 1, INVALID: 2}
EXIT_MEANING = {
    0: "no gated metric regressed beyond tolerance",
    1: "a gated metric is worse beyond tolerance, at the gate's 1% false-regression rate",
    2: "a run was invalid or an arm crashed, so nothing was judged",
}


UNDECIDED_FAILS = "nothing regressed, but the gate could not decide, and this one fails then"
INCONCLUSIVE_EXIT = {"pass": 0, "fail": 1}  # a team's choice for an undecided gate: its code
INCONCLUSIVE_CHOICES = tuple(INCONCLUSIVE_EXIT)


def exit_meaning(code: int, simulated: bool = False, verdict: str = "") -> str:
    """What the exit code says; a simulation is deterministic, so it has no error rate. An
    INCONCLUSIVE that exits 1 is a team's choice (`--inconclusive fail`), not a regression."""
    if code == 1 and verdict == Verdict.INCONCLUSIVE:
        return UNDECIDED_FAILS
    if code == 1 and simulated:
        return "a gated metric is worse beyond tolerance in the simulation"
    return EXIT_MEANING[code]
