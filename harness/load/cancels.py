"""Requests the client cancels by design, as users closing a tab and agents stopping a stream
do: a seeded choice of a phase's requests, each dropped after so many tokens or so long after
it was sent (docs/suites.md, "Cancellations")."""

from __future__ import annotations

import random

from harness.workload.phase import Phase

SALT = 7919  # the choice's seed is the phase's, moved off the prompts' and the arrivals'


def cancelled(phase: Phase) -> frozenset[int]:
    """The request indices the client cancels: round(share x requests), the same every run."""
    if phase.cancels is None:
        return frozenset()
    total = phase.total_requests
    rng = random.Random(phase.seed + SALT)
    return frozenset(rng.sample(range(total), round(phase.cancels.share * total)))
