"""Device memory from the server's own Prometheus gauges (named in its project file): scraped
through each phase, summed over the named gauges' series, the phase's peak kept. For servers
NVML cannot see: one given by URL, one in a container, a device of another vendor."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from harness.load.counters import MetricsEndpoint, Snapshot
from harness.load.server_reads import byte_count

EVERY_S = 0.25  # a scrape costs the server a little; a KV pool fills over seconds


def gauge_total(snap: Snapshot, names: tuple[str, ...]) -> float | None:
    """The sum of every series of the named gauges; None when the scrape has none of them."""
    if not snap.ok or not any(n in snap.names for n in names):
        return None
    return sum(v for key, v in snap.values.items() if key.split("{", 1)[0] in names)


@dataclass(slots=True)
class GaugeWatch:
    """Scrapes `names` every EVERY_S while a phase runs; `peak` is the largest sum seen, in
    bytes (`scale` bytes per unit of the gauges)."""

    endpoint: MetricsEndpoint
    names: tuple[str, ...]
    scale: float = 1.0
    peak: float | None = None
    refused: str = ""  # why the phase's device memory is unmeasured: a figure no byte count

    @property
    def source(self) -> str:
        scaled = f" x {self.scale:g} bytes" if self.scale != 1 else ""
        return f"server /metrics: {' + '.join(self.names)}{scaled}"

    def take(self, snap: Snapshot) -> None:
        total = gauge_total(snap, self.names)
        if total is None or self.refused:
            return
        value = byte_count(total * self.scale)
        if value is None:  # one figure that cannot be bytes: no peak of this phase is trusted
            self.refused = f"{' + '.join(self.names)} read {total!r}, not a byte count"
            self.peak = None
            return
        self.peak = value if self.peak is None else max(self.peak, value)

    async def watch(self) -> None:
        """Until cancelled (the phase ended)."""
        while self.endpoint.available:
            self.take(await self.endpoint.scrape())
            await asyncio.sleep(EVERY_S)

    def reset(self) -> None:
        self.peak, self.refused = None, ""
