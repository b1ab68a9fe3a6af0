"""Prometheus counters of the server: /metrics scraped before and after a phase, parsed with
prometheus_client, and reduced to per-series deltas."""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from harness.load.server_reads import METRICS_CAP, fetch
from harness.workload.expect import series_key


@dataclass(slots=True)
class Snapshot:
    """One scrape: sample values by canonical series key, and the sample names exported."""

    values: dict[str, float] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    ok: bool = True
    error: str = ""


def parse_metrics(text: str) -> Snapshot:
    """Parse Prometheus text; histogram buckets are dropped (their _sum and _count stay)."""
    snap = Snapshot()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.endswith("_bucket") or sample.name.endswith("_created"):
                    continue
                snap.names.add(sample.name)
                snap.values[series_key(sample.name, dict(sample.labels))] = float(sample.value)
    except (ValueError, TypeError) as exc:
        return Snapshot(ok=False, error=f"unparsable /metrics: {exc}")
    return snap


def deltas(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """after - before for every series present after the phase (absent before counts as 0)."""
    return {key: value - before.values.get(key, 0.0) for key, value in after.values.items()}


class MetricsEndpoint:
    """`/metrics` of one server; `available` turns False at the first failed scrape."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session, self.url = session, base + "/metrics"
        self.available = True
        self.error = ""

    async def scrape(self) -> Snapshot:
        if not self.available:
            return Snapshot(ok=False, error=self.error)
        try:
            status, body = await fetch(self.session, "GET", self.url, cap=METRICS_CAP)
            if status != 200:
                raise ValueError(f"/metrics answered HTTP {status}")
            text = body.decode("utf-8", "replace")
        except ValueError as exc:
            self.available, self.error = False, str(exc) or type(exc).__name__
            return Snapshot(ok=False, error=self.error)
        snap = parse_metrics(text)
        if not snap.ok:
            self.available, self.error = False, snap.error
        return snap
