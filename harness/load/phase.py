"""One measured phase: reset the peaks, scrape counters, fire the load, then read the exact
peaks, the counter deltas and the phase's `expect` verdicts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.load.client_check import LagProbe, client_summary
from harness.load.counters import MetricsEndpoint, Snapshot, deltas
from harness.load.frozen_gc import frozen_gc
from harness.load.gauges import GaugeWatch
from harness.load.load import LoadDriver
from harness.load.memory_peaks import MemoryEndpoint, read_hwm, reset_hwm
from harness.load.memory_timeline import Sampler
from harness.load.metrics import latency_stats, time_windows
from harness.load.prompts import Prompt
from harness.load.record import RequestRecord
from harness.workload.expect import ExpectContext, ExpectOutcome, evaluate
from harness.workload.phase import Phase

CAUGHT_RATIO = 0.9  # the sampled peak "caught" the exact one when it reached 90% of it


class Progress:
    """What the phase reports while it runs; the CLI plugs a rich display in here. Shown for
    as long as it is entered (`with progress(label) as bar:`)."""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None: ...

    def starting(self, elapsed_s: float, line: str) -> None:
        """A server is still starting: seconds since its launch, its log's last line."""

    def view(self, label: str) -> Progress:
        """Rows of their own on this display, for one of several servers measured at once
        (entered and left without starting or stopping it)."""
        return Progress()

    def phase_started(self, name: str, total: int) -> None: ...

    def request_done(self, record: RequestRecord) -> None: ...


@dataclass(slots=True)
class Probes:
    """Everything a phase measures with, for one server."""

    driver: LoadDriver
    metrics: MetricsEndpoint
    memory: MemoryEndpoint
    sampler: Sampler | None
    strict: bool  # fail, rather than skip, expectations on series the server does not export
    server_exited: Callable[[], bool] = lambda: False
    gauges: GaugeWatch | None = None  # the project file's device-memory gauges on /metrics


@dataclass(slots=True)
class PhaseResult:
    name: str
    records: list[RequestRecord]
    window: tuple[float, float]
    memory: dict = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    expect: list[ExpectOutcome] = field(default_factory=list)
    paused_s: float = 0.0  # inside the window, waiting while other arms took their turns
    client: dict = field(default_factory=dict)  # the client's own check (client_check.py)

    @property
    def measured(self) -> list[RequestRecord]:
        """The records the statistics count: all but those sent while the phase settled."""
        return [r for r in self.records if not r.settling]

    def as_dict(self) -> dict:
        out = {
            "window": [round(t, 6) for t in self.window],
            "paused_s": round(self.paused_s, 6),
            "stats": latency_stats(self.measured, paused={self.name: self.paused_s}),
            "memory": self.memory,
            "expect": [o.as_dict() for o in self.expect],
            "client": self.client,
            "windows": time_windows(self.records, *self.window),
        }
        turns = sorted({r.turn for r in self.measured})
        if len(turns) > 1:  # conversations: the same scalars per turn index
            out["turns"] = {
                str(k): latency_stats([r for r in self.measured if r.turn == k]) for k in turns
            }
        return out


async def run_phase(
    probes: Probes, phase: Phase, prompts: list[Prompt], progress: Progress, measured: bool = True
) -> PhaseResult:
    """Run `phase`; a warm-up (`measured=False`) skips peaks, counters and expectations."""
    sampler, tree = probes.sampler, probes.sampler.tree() if probes.sampler else []
    before, hwm_reset = Snapshot(ok=False), False
    if measured:  # probes take a turn: other arms' bursts may be under way
        async with probes.driver.own_turn():
            before = await probes.metrics.scrape()
            await probes.memory.reset()
            hwm_reset = reset_hwm(tree)
    progress.phase_started(phase.name, phase.total_requests)
    watchdog = asyncio.create_task(_watch(probes))
    gauges = probes.gauges if measured else None
    if gauges:
        gauges.reset()
        gauges.take(before)
    watching = asyncio.create_task(gauges.watch()) if gauges else None
    pool = probes.driver.workers  # with client workers, theirs are the loops that read
    probe = LagProbe()
    try:
        with frozen_gc():
            start = sampler.mark(phase.name) if sampler else probes.driver.now()
            if pool is None:
                probe.start()
            records = await probes.driver.run_phase(phase, prompts, progress.request_done)
    finally:
        probe.stop()
        watchdog.cancel()
        if watching:
            watching.cancel()
    end = probes.driver.now()
    for r in records:
        r.settling = r.send < start + phase.settle_s
    result = PhaseResult(phase.name, records, (start, end))
    result.paused_s = probes.driver.paused.get(phase.name, 0.0)
    tokens, coalesced = sum(r.client_tokens for r in records), sum(r.coalesced for r in records)
    if pool is None:
        probe.saw(records, probes.driver.t0)
    readers, procs = (pool.take_probes(), pool.n) if pool else ([probe], 1)
    result.client = client_summary(readers, tokens, coalesced, procs)
    if not measured:
        return result
    if probes.server_exited():  # only the timeline can still say something
        sampled = sampler.timeline.window_max(start, end) if sampler else None
        result.memory = {"peak_rss_bytes": None, "peak_rss_sampled_bytes": sampled}
        return result
    async with probes.driver.own_turn():
        after = await probes.metrics.scrape()
        if gauges:
            gauges.take(after)
        result.memory = await _memory(probes, tree, hwm_reset, start, end)
    result.counters = deltas(before, after) if before.ok and after.ok else {}
    ctx = ExpectContext(result.counters, after.names, probes.strict, before.ok and after.ok)
    result.expect = evaluate(list(phase.expect), ctx)
    return result


async def _watch(probes: Probes) -> None:
    while not probes.server_exited():
        await asyncio.sleep(0.05)
    probes.driver.stop.set()


async def _memory(probes: Probes, tree: list, hwm_reset: bool, start: float, end: float) -> dict:
    sampled = probes.sampler.timeline.window_max(start, end) if probes.sampler else None
    # processes started during the phase count too: their whole high-water mark is in it
    now = {p.pid: p for p in [*tree, *(probes.sampler.tree() if probes.sampler else [])]}
    exact = read_hwm(list(now.values())) if hwm_reset else None
    server = await probes.memory.read()
    source = "VmHWM" if exact is not None else None
    if exact is None and server and server.peak_rss_bytes is not None:
        exact, source = server.peak_rss_bytes, "server /v1/memory"
    if exact is None and sampled is not None:
        exact, source = sampled, "sampled (no exact peak on this platform)"
    device, device_source = None, None
    if probes.gauges and probes.gauges.refused:  # what the project file chose, unreadable
        device_source = f"unmeasured: server /metrics {probes.gauges.refused}"
    elif probes.gauges and probes.gauges.peak is not None:  # what the project file chose
        device, device_source = int(probes.gauges.peak), probes.gauges.source
    elif server and server.device_peak_bytes is not None:
        device, device_source = server.device_peak_bytes, "server /v1/memory"
    elif probes.sampler and probes.sampler.timeline.gpu:
        device, device_source = probes.sampler.timeline.window_max(start, end, "gpu"), "nvml"
    ratio = sampled / exact if sampled and exact else None
    return {
        "peak_rss_bytes": exact,
        "peak_rss_source": source,
        "peak_rss_sampled_bytes": sampled,
        "sampled_over_exact": round(ratio, 4) if ratio is not None else None,
        "sampled_caught_peak": ratio >= CAUGHT_RATIO if ratio is not None else None,
        "peak_device_bytes": device,
        "peak_device_source": device_source,
        "server_memory": server.as_dict() if server else None,
    }
