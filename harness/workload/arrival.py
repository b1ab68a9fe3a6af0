"""How a phase's requests arrive, one record per mode: all at once in bursts, from a closed loop
of clients, at a rate (Poisson or gamma gaps, optionally ramping), or at a trace's times. Each
holds only its own settings, checks them where it is made (a one-line SuiteError the phase
reader prefixes with the phase) and states the fingerprint facts that set it apart."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from harness.workload.trace import Trace

RAMPS = ("linear", "exponential")


class SuiteError(ValueError):
    """A suite that cannot be found or does not validate; the message is one line."""


def finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def whole(x: object, least: int) -> bool:
    """An integer (not a bool) of at least `least`."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= least


@dataclass(frozen=True, slots=True)
class Concurrency:
    """A closed loop: each of the phase's clients sends its next request when an answer ends."""

    mode: ClassVar[str] = "concurrency"
    open_loop: ClassVar[bool] = False

    def facts(self) -> dict:
        return {}


@dataclass(frozen=True, slots=True)
class Burst:
    """Every request at once; `bursts` of them, each after the last one ended."""

    bursts: int = 1
    mode: ClassVar[str] = "burst"
    open_loop: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not whole(self.bursts, 1):
            raise SuiteError(f"bursts must be a positive integer, got {self.bursts!r}")

    def facts(self) -> dict:
        return {"bursts": self.bursts} if self.bursts != 1 else {}


@dataclass(frozen=True, slots=True)
class Rate:
    """An open loop at `rate` requests/s: gamma gaps of shape `burstiness` (1: Poisson, < 1
    burstier), the rate ramping "linear" or "exponential" to `ramp_to` when a ramp is given."""

    rate: float
    burstiness: float = 1.0
    ramp: str = ""
    ramp_to: float | None = None
    mode: ClassVar[str] = "rate"
    open_loop: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not (finite(self.rate) and self.rate > 0):
            raise SuiteError('arrival = "rate" needs a finite rate > 0 (requests/s)')
        if not (finite(self.burstiness) and self.burstiness > 0):
            raise SuiteError("burstiness must be a finite number > 0 (1 is Poisson)")
        if self.ramp and self.ramp not in RAMPS:
            raise SuiteError("ramp must be linear or exponential")
        if bool(self.ramp) != (self.ramp_to is not None):
            raise SuiteError("a ramp needs both ramp and ramp_to")
        if self.ramp_to is not None and not (finite(self.ramp_to) and self.ramp_to > 0):
            raise SuiteError("ramp_to must be a finite rate > 0 (a ramp cannot end at or below 0)")

    def facts(self) -> dict:
        return {
            **({"burstiness": self.burstiness} if self.burstiness != 1.0 else {}),
            **({"ramp": self.ramp, "ramp_to": self.ramp_to} if self.ramp else {}),
        }


@dataclass(frozen=True, slots=True)
class Replay:
    """A trace's requests at their timestamps, times `time_scale` (0.5: twice as fast)."""

    trace: Trace
    time_scale: float = 1.0
    mode: ClassVar[str] = "trace"
    open_loop: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not (finite(self.time_scale) and self.time_scale > 0):
            raise SuiteError("time_scale must be a finite number > 0")

    def facts(self) -> dict:
        return {"trace_sha256": self.trace.digest, "time_scale": self.time_scale}


Arrival = Concurrency | Burst | Rate | Replay
MODES: dict[str, type[Arrival]] = {a.mode: a for a in (Burst, Concurrency, Rate, Replay)}


def at_rate(arrival: Arrival, rate: float) -> Rate:
    """An open loop at `rate` in place of `arrival`: a rate arrival keeps its burstiness and
    ramp, any other becomes Poisson."""
    return replace(arrival, rate=rate) if isinstance(arrival, Rate) else Rate(rate)
