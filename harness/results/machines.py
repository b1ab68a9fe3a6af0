"""Which machine a run's record says it ran on: its machine facts (runs/machine.py collects
them) less those that say how busy it was."""

from __future__ import annotations

VOLATILE = ("load_average",)  # how busy the machine was, not which machine it is


def machine_identity(facts: dict) -> dict:
    """The facts that name a machine: two runs on one box have equal identities at any load."""
    return {k: v for k, v in facts.items() if k not in VOLATILE}
