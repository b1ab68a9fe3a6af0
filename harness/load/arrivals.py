"""When each request of an open-loop phase is due: Poisson or gamma-distributed gaps at a rate
(burstiness as vLLM's `bench serve` takes it: 1.0 is Poisson, lower is burstier, higher is
steadier), and that rate ramping linearly or exponentially from `rate` to `ramp_to`. Pure:
seeded, no clock."""

from __future__ import annotations

import math
import random

from harness.workload.arrival import Burst, Concurrency, Rate, Replay
from harness.workload.phase import Phase


def gaps(rng: random.Random, n: int, burstiness: float) -> list[float]:
    """n gaps of mean exactly 1: gamma(shape = burstiness, scale = 1 / burstiness), whose
    coefficient of variation is 1 / sqrt(burstiness) (exponential at 1), divided by their own
    mean. So n + 1 arrivals span n / rate: the phase offers the rate it is labelled with, not
    a sample's (16 req/s drew 13.2 once). Exponential gaps over their sum are the spacings of
    a Poisson process given its count: the arrivals stay Poisson."""
    if burstiness == 1.0:
        drawn = [rng.expovariate(1.0) for _ in range(n)]
    else:
        drawn = [rng.gammavariate(burstiness, 1.0 / burstiness) for _ in range(n)]
    mean = sum(drawn) / n if n else 1.0
    return [g / mean for g in drawn]


def ramp_span(arrival: Rate, n: int) -> float:
    """The seconds a ramp takes: the span over which its curve from `rate` to `ramp_to`
    expects exactly `n` arrivals (the phase's requests)."""
    r0, r1 = arrival.rate, _end(arrival)
    if arrival.ramp == "linear":
        return 2 * n / (r0 + r1)
    k = r1 / r0
    return n / r0 if abs(k - 1) < 1e-12 else n * math.log(k) / (r0 * (k - 1))


def _end(arrival: Rate) -> float:
    return arrival.rate if arrival.ramp_to is None else arrival.ramp_to


def ramp_time(arrival: Rate, n: int, work: float) -> float:
    """The time at which the ramp's expected arrivals, Lambda(t) = the integral of its rate,
    reach `work`: unit-mean gaps in `work` become its arrivals (time rescaling). Past the
    ramp's `n` requests, the end rate goes on."""
    r0, r1, span = arrival.rate, _end(arrival), ramp_span(arrival, n)
    if work >= n:
        return span + (work - n) / r1
    if arrival.ramp == "linear":
        a = (r1 - r0) / (2 * span)  # Lambda(t) = r0 t + a t^2
        if abs(a) < 1e-12:
            return work / r0
        return (-r0 + math.sqrt(r0 * r0 + 4 * a * work)) / (2 * a)
    k = r1 / r0  # rate r0 * k^(t / span): Lambda(t) = r0 span / ln k * (k^(t / span) - 1)
    if abs(k - 1) < 1e-12:
        return work / r0
    return span * math.log1p(work * math.log(k) / (r0 * span)) / math.log(k)


def rate_at(arrival: Rate, n: int, t: float) -> float:
    """The ramp's rate (requests/s) at `t` seconds; past its span, the end rate."""
    r0, r1, span = arrival.rate, _end(arrival), ramp_span(arrival, n)
    x = min(max(t / span, 0.0), 1.0)
    return r0 + (r1 - r0) * x if arrival.ramp == "linear" else r0 * (r1 / r0) ** x


def arrival_offsets(phase: Phase) -> list[float] | None:
    """Due times (seconds after the phase start), or None for closed-loop concurrency."""
    match phase.arrival:
        case Concurrency():
            return None
        case Burst():
            return [0.0] * phase.requests
        case Replay(trace=trace, time_scale=scale):
            return trace.offsets(scale)
        case Rate() as arrival:
            return rate_offsets(arrival, phase.requests, phase.seed)


def rate_offsets(arrival: Rate, n: int, seed: int) -> list[float]:
    """`n` due times at `arrival`'s rate (or along its ramp), drawn from `seed`."""
    unit = gaps(random.Random(seed), n - 1, arrival.burstiness)
    work, out = 0.0, []
    for gap in [*unit, 0.0]:  # the first due at once, each later one a gap after
        out.append(ramp_time(arrival, n, work) if arrival.ramp else work / arrival.rate)
        work += gap
    return out


def offered_rate(offsets: list[float]) -> float | None:
    """The requests/s a schedule offers: its arrivals after the first over their span."""
    span = offsets[-1] - offsets[0] if offsets else 0.0
    return (len(offsets) - 1) / span if span > 0 else None
