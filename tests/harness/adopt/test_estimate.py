"""A gate's minutes from one cold run: one at a time, every arm's whole run in turn; together,
one start's wait and every arm's load; at once on devices of their own, one run a round."""

from __future__ import annotations

import pytest

from harness.adopt.estimate import AT_ONCE, ONE_AT_A_TIME, TOGETHER, estimate, round_seconds


@pytest.mark.parametrize(
    ("servers", "round_s"),
    [(ONE_AT_A_TIME, 2 * 50.0), (TOGETHER, 30.0 + 2 * 20.0), (AT_ONCE, 50.0)],
)
def test_a_round_by_how_its_servers_run(servers, round_s):
    assert round_seconds(50.0, 30.0, 2, servers) == round_s


def test_the_gate_adds_every_arms_build_to_its_rounds():
    cost = estimate(50.0, 30.0, ONE_AT_A_TIME, 3, 9, build_s=120.0)
    assert (cost.round_s, cost.first_look_s, cost.most_s) == (100.0, 240 + 300.0, 240 + 900.0)
