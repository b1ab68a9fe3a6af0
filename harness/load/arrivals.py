"""When each request of an open-loop phase is due: Poisson or gamma-distributed gaps at a rate
(burstiness as vLLM's `bench serve` takes it: 1.0 is Poisson, lower is burstier, higher is
steadier), and that rate ramping linearly or exponentially from `rate` to `ramp_to`. Pure:
seeded, no clock."""

from __future__ import annotations

import math
import random

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


def ramp_span(phase: Phase) -> float:
    """The seconds a ramp takes: the span over which its curve from `rate` to `ramp_to`
    expects exactly `requests` arrivals."""
    r0, r1, n = phase.rate, phase.ramp_to, phase.requests
    if phase.ramp == "linear":
        return 2 * n / (r0 + r1)
    k = r1 / r0
    return n / r0 if abs(k - 1) < 1e-12 else n * math.log(k) / (r0 * (k - 1))


def ramp_time(phase: Phase, work: float) -> float:
    """The time at which the ramp's expected arrivals, Lambda(t) = the integral of its rate,
    reach `work`: unit-mean gaps in `work` become its arrivals (time rescaling). Past the
    ramp's `requests`, the end rate goes on."""
    r0, r1, n, span = phase.rate, phase.ramp_to, phase.requests, ramp_span(phase)
    if work >= n:
        return span + (work - n) / r1
    if phase.ramp == "linear":
        a = (r1 - r0) / (2 * span)  # Lambda(t) = r0 t + a t^2
        if abs(a) < 1e-12:
            return work / r0
        return (-r0 + math.sqrt(r0 * r0 + 4 * a * work)) / (2 * a)
    k = r1 / r0  # rate r0 * k^(t / span): Lambda(t) = r0 span / ln k * (k^(t / span) - 1)
    if abs(k - 1) < 1e-12:
        return work / r0
    return span * math.log1p(work * math.log(k) / (r0 * span)) / math.log(k)


def rate_at(phase: Phase, t: float) -> float:
    """The ramp's rate (requests/s) at `t` seconds; past its span, the end rate."""
    r0, r1, span = phase.rate, phase.ramp_to, ramp_span(phase)
    x = min(max(t / span, 0.0), 1.0)
    return r0 + (r1 - r0) * x if phase.ramp == "linear" else r0 * (r1 / r0) ** x


def arrival_offsets(phase: Phase) -> list[float] | None:
    """Due times (seconds after the phase start), or None for closed-loop concurrency."""
    if phase.arrival == "concurrency":
        return None
    if phase.arrival == "burst":
        return [0.0] * phase.requests
    if phase.arrival == "trace":
        return phase.trace.offsets(phase.time_scale)
    unit = gaps(random.Random(phase.seed), phase.requests - 1, phase.burstiness)
    work, out = 0.0, []
    for gap in [*unit, 0.0]:  # the first due at once, each later one a gap after
        out.append(ramp_time(phase, work) if phase.ramp else work / phase.rate)
        work += gap
    return out


def offered_rate(offsets: list[float]) -> float | None:
    """The requests/s a schedule offers: its arrivals after the first over their span."""
    span = offsets[-1] - offsets[0] if offsets else 0.0
    return (len(offsets) - 1) / span if span > 0 else None
