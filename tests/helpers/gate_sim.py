"""Simulated whole gates: every gated metric of short-concurrency at once, correlated the way
real runs are, through harness ab's full stopping rule (looks at 3, 5, 7, 9 rounds)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.results.comparison import Comparison
from harness.stats.compare import compare_rounds, needs_more_rounds, next_look
from harness.stats.rounds_needed import extended
from harness.stats.sequential import Schedule

from helpers.fake_runs import make_run

GATE = {"ttft_p50_ms": 0.15, "ttft_p95_ms": 0.20, "tok_s": 0.15, "peak_rss_bytes": 0.10}
LEVELS = {"ttft_p50_ms": 900.0, "ttft_p95_ms": 1000.0, "tok_s": 60.0, "peak_rss_bytes": 1.3e9}


@dataclass(frozen=True)
class Noise:
    """Per-run lognormal noise (sigma of ln value) and how much of it one machine-speed factor
    shares: a slow run is slow on every latency metric and on throughput at once."""

    ttft: float = 0.07  # TTFT CV per run ~7%
    tok_s: float = 0.04
    rss: float = 0.001  # peaks repeat to a page or two
    shared: float = 0.8  # correlation of each metric with the run's speed factor
    round_drift: float = 0.05  # what one round shares across arms (cancels in the pairing)
    itl: float = 0.0  # > 0: runs also carry ITL p50 and TPOT with this noise (decode's own)
    order: float = 0.0  # ln: the arm measured second in a round is this much slower


def one_run(rng: np.random.Generator, noise: Noise, drift: float, ttft_shift: float) -> dict:
    speed = rng.standard_normal()
    w = np.sqrt(1 - noise.shared**2)

    def ln(sigma: float) -> float:
        return sigma * (noise.shared * speed + w * rng.standard_normal())

    p50 = LEVELS["ttft_p50_ms"] * ttft_shift * np.exp(drift + ln(noise.ttft))
    spread = np.exp(abs(ln(noise.ttft)) * 0.5)  # the tail moves with the median, plus a bit
    summary = {
        "ttft_p50_ms": p50,
        "ttft_p95_ms": p50 * LEVELS["ttft_p95_ms"] / LEVELS["ttft_p50_ms"] * spread,
        "tok_s": LEVELS["tok_s"] / np.sqrt(ttft_shift) * np.exp(-drift - ln(noise.tok_s)),
        "peak_rss_bytes": LEVELS["peak_rss_bytes"] * np.exp(ln(noise.rss)),
    }
    if noise.itl:
        itl = 40.0 * np.exp(drift + ln(noise.itl))
        summary |= {"itl_p50_ms": itl, "tpot_ms": itl * np.exp(0.3 * ln(noise.itl))}
    return make_run(summary)


def gate(
    seed: int,
    noise: Noise,
    ttft_shift: float = 1.0,
    first: int = 3,
    cap: int = 9,
    tolerances: dict[str, float] = GATE,
    extend_to: int | None = None,
) -> Comparison:
    """One simulated `harness ab`: rounds until the stopping rule says stop; with `extend_to`
    (`--max-rounds auto`) the last look moves out as the noise measured needs."""
    rng = np.random.default_rng(seed)
    schedule, rounds, target = Schedule.plan(first, cap), [], first
    while True:
        while len(rounds) < target:
            drift = noise.round_drift * rng.standard_normal()
            second = noise.order  # AB, BA, ...: head second in odd rounds, as harness ab orders
            head_second = len(rounds) % 2 == 0
            rounds.append(
                {
                    "round": len(rounds) + 1,
                    "order": ["base", "head"] if head_second else ["head", "base"],
                    "base": one_run(rng, noise, drift + (0 if head_second else second), 1.0),
                    "head": one_run(rng, noise, drift + (second if head_second else 0), ttft_shift),
                }
            )
        result = compare_rounds(rounds, tolerances, 16 * 2**20, schedule=schedule)
        if extend_to and needs_more_rounds(result):
            schedule = extended(schedule, result, extend_to)
        target = next_look(result, schedule)
        if target is None:
            return result


def verdicts(
    gates: int,
    noise: Noise,
    ttft_shift: float = 1.0,
    seed: int = 0,
    tolerances=GATE,
    extend_to: int | None = None,
) -> list[Comparison]:
    return [
        gate(seed * 1_000_003 + i, noise, ttft_shift, tolerances=tolerances, extend_to=extend_to)
        for i in range(gates)
    ]
