"""One measured run of one arm, as a record: the JSON `harness run` writes and an A/B result
holds per arm per round (docs/run-json.md). Its summary holds every catalogue metric; its open
tables (a server's config, a phase's stats, the capacity search) are kept as they came."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results.errors import ComparisonError
from harness.results.metrics import METRICS
from harness.results.record import Count, Date, Pos, Record, Table, Words, bad, read

EXPORTED = ("phase", "index", "prompt_tokens", "max_tokens")


@dataclass(frozen=True, kw_only=True)
class Request(Record):
    """One request as the client saw it (load/record.py writes it); times in seconds since
    the run's start, durations in milliseconds. `harness export` needs the first four
    (EXPORTED); the other verbs read a request without them."""

    phase: str | None = None
    index: Count | None = None
    prompt_tokens: Count | None = None
    max_tokens: Count | None = None
    arrival: float = 0.0
    send: float = 0.0
    first_token: float | None = None
    end: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    reads: list[list[float]] = field(default_factory=list)  # [time, tokens] per read
    output_tokens: Count | None = None
    client_tokens: Count = 0
    usage_prompt_tokens: Count | None = None
    status: Count = 0
    error: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    turn: Count = 1
    cached_tokens: Count | None = None
    coalesced: Count | None = None
    cancelled: bool | None = None
    output_sha256: str | None = None  # of the text it streamed
    settling: bool | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    queue_ms: float | None = None
    ok: bool = False
    token_mismatch: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Machine(Record):
    cpu_model: str | None = None
    cpu_flags: list[str] | None = None
    gpus: list[str] | None = None
    logical_cores: Count | None = None
    physical_cores: Count | None = None
    usable_cores: Count | None = None
    memory_bytes: Pos | None = None
    load_average: list[float] | None = None
    platform: str | None = None
    python: str | None = None


@dataclass(frozen=True, kw_only=True)
class FitError(Record):
    """How far a cost model's fitted prices are from the steps it was fitted to, for one
    family of steps (engine/sim/costs.py)."""

    steps: Count | None = None
    mean_rel_error: float | None = None
    p95_rel_error: float | None = None
    mean_signed_error: float | None = None


@dataclass(frozen=True, kw_only=True)
class Simulation(Record):
    """What priced a simulated run (engine/sim): its cost model, that model's fit to real
    steps, and the simulator's own time; `fit_error` is the fit said as one phrase."""

    name: str | None = None
    source: str | None = None
    model: str | None = None
    fit: dict[str, FitError] | None = None  # per family of steps
    wall_s: float | None = None
    mask_bytes_max: float | None = None
    kv_bytes_max: float | None = None
    fit_error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Server(Record):
    """The server a run measured, as the harness found it."""

    url: str | None = None
    pid: Count | None = None
    startup_s: float | None = None
    startup_peak_rss_bytes: Pos | None = None
    device_memory_life: Table | None = None
    ready_path: str | None = None
    health: Table | None = None
    commit: str | None = None
    version: str | None = None
    model: str | None = None
    backend: str | None = None
    device: str | None = None
    dtype: str | None = None
    config: Table | None = None
    runtime: dict[str, str | None] | None = None
    served_model: str | None = None
    log_path: str | None = None
    exit_code: int | None = None
    log_tail: str | None = None
    simulated: Simulation | None = None


@dataclass(frozen=True, kw_only=True)
class Expectation(Record):
    """A suite's `expect` rule on a series, judged on this run."""

    series: str
    rule: str | None = None
    status: str | None = None
    delta: float | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Window(Record):
    """One time slice of a phase (load/metrics.time_windows), seconds from the phase's start."""

    from_s: float
    to_s: float | None = None
    sent: Count | None = None
    errors: Count | None = None
    ttft_p50_ms: float | None = None
    tpot_ms: float | None = None
    itl_p50_ms: float | None = None
    tok_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class PhaseMemory(Record):
    """A phase's memory peaks and where each was read (load/phase.py)."""

    peak_rss_bytes: float | None = None
    peak_rss_source: str | None = None
    peak_rss_sampled_bytes: float | None = None
    sampled_over_exact: float | None = None
    sampled_caught_peak: bool | None = None
    peak_device_bytes: float | None = None
    peak_device_source: str | None = None
    server_memory: Table | None = None  # what the server's /v1/memory said


@dataclass(frozen=True, kw_only=True)
class PhaseResult(Record):
    window: list[float] | None = None
    stats: dict[str, float | None] | None = None
    memory: PhaseMemory | None = None
    expect: list[Expectation] | None = None
    paused_s: float | None = None
    client: Table | None = None
    windows: list[Window] | None = None


@dataclass(frozen=True, kw_only=True)
class CapacityLevel(Record):
    """One level a capacity search tried: the share of its requests within the [slo]."""

    level: float
    attained: float
    met: bool
    req_s: float | None = None
    offered_req_s: float | None = None
    requests: Count | None = None
    ok: Count | None = None
    ttft_p95_ms: float | None = None
    tpot_ms: float | None = None
    e2e_p95_ms: float | None = None
    goodput_req_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class CapacitySearch(Record):
    """A run's capacity search (runs/measure.py): every level tried, in order, the bracket,
    and the capacity at the highest level met; `error` where it could not search."""

    mode: str | None = None
    attainment: float | None = None
    levels: list[CapacityLevel] = field(default_factory=list)
    met_level: float | None = None
    missed_level: float | None = None
    capacity_req_s: float | None = None
    stopped: str | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class PhaseFacts(Record):
    """What a phase sent, as the workload's fingerprint holds it."""

    name: str | None = None
    arrival: str | None = None
    clients: Count | None = None
    requests: Count | None = None
    rate: float | None = None
    burstiness: float | None = None
    endpoint: str | None = None
    max_tokens: Count | None = None
    prompt_lengths: list[Count] | None = None
    seed: int | None = None
    prefix_tokens: Count | None = None
    ignore_eos: bool | None = None
    temperature: float | None = None
    bursts: Count | None = None
    ramp: str | None = None
    ramp_to: float | None = None
    trace_sha256: str | None = None
    time_scale: float | None = None
    dataset_sha256: str | None = None
    turns: Count | None = None
    think_time_s: float | None = None
    followup_tokens: Count | None = None
    settle_s: float | None = None
    cancel_share: float | None = None
    cancel_after_tokens: Count | None = None
    cancel_after_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class Workload(Record):
    phases: list[PhaseFacts] | None = None
    suite: str | None = None
    model: str | None = None
    prompts_sha256: str | None = None
    slo: Table | None = None


@dataclass(frozen=True, kw_only=True)
class Sampler(Record):
    hz: float | None = None
    achieved_hz: float | None = None
    max_gap_s: float | None = None
    samples: Count | None = None
    exact_peak: str | None = None


@dataclass(frozen=True, kw_only=True)
class Timeline(Record):
    t: list[float]
    rss: list[float | None]
    marks: list[list[Any]] = field(default_factory=list)  # [t, phase name] where a phase began
    device: Table | None = None

    def check(self, where: str) -> None:
        for i, mark in enumerate(self.marks):
            if len(mark) != 2:
                raise bad(f"{where}.marks[{i}]", mark, "[t, phase]")
            read(float, mark[0], f"{where}.marks[{i}][0]")


@dataclass(frozen=True, kw_only=True)
class ServedArm(Record):
    """The arm a run measured, as the harness started or reached its server."""

    kind: str | None = None
    server: str | None = None
    model: str | None = None
    flags: Words | None = None
    template: str | None = None
    url: str | None = None
    pid: Count | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    device: str | None = None
    api_key: str | None = None  # "set" when one was sent; never the key
    reports_commit: bool | None = None
    simulated: bool | None = None


@dataclass(frozen=True, kw_only=True)
class RunSuite(Record):
    name: str
    path: str | None = None
    gate: dict[str, float | None] | None = None


@dataclass(frozen=True, kw_only=True)
class HarnessBuild(Record):
    version: str | None = None
    commit: str | None = None


@dataclass(frozen=True, kw_only=True)
class Run(Record):
    summary: dict[str, float | None]
    schema: str | None = None
    started_at: Date | None = None
    duration_s: float | None = None
    clock_origin: float | None = None
    suite: RunSuite | None = None
    arm: ServedArm | None = None
    outcome: str | None = None
    valid: bool = True
    invalid_reasons: list[str] = field(default_factory=list)
    fingerprint: str | None = None
    workload: Workload | None = None
    capacity: CapacitySearch | None = None
    phases: dict[str, PhaseResult] | None = None
    counters: dict[str, dict[str, float]] | None = None
    timeline: Timeline | None = None
    sampler: Sampler | None = None
    prompt_tokenizer: str | None = None
    prompt_tokens_exact: bool | None = None
    requests: list[Request] = field(default_factory=list)
    warmup_requests: list[Request] = field(default_factory=list)
    request_count: Count | None = None
    server: Server | None = None
    machine: Machine | None = None
    harness: HarnessBuild | None = None
    simulated: Simulation | None = None
    memory_source: str | None = None

    def check(self, where: str) -> None:
        """A summary's latencies, rates, counts and byte counts are >= 0 (a negative memory
        peak would pass the memory rule); the queue times are due-to-sent, which a timer's
        wake-up can put a hair below 0, so only finite."""
        for name, entry in METRICS.items():
            value = self.summary.get(name)
            if value is not None and entry.column != "queue_ms" and value < 0:
                raise ComparisonError(f"{where}.summary.{name} is {value!r}, not a finite "
                                      "number >= 0")  # fmt: skip

    def exportable(self, where: str) -> None:
        """Each request has what `harness export` rebuilds it from, and one that was answered
        (status 200, no error) has ended: export spans it."""
        for i, req in enumerate(self.requests):
            for name in EXPORTED:
                if getattr(req, name) is None:
                    raise ComparisonError(f"{where}.requests[{i}].{name} is missing")
            if req.status == 200 and not req.error and req.end is None:
                raise ComparisonError(f"{where}.requests[{i}].end is missing for an answered "
                                      "request")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RunArm(Record):
    """A `harness run` JSON's arm (the arm as `harness ab` describes one): what history and
    the pytest plugin read of it."""

    label: str | None = None
    commit: str | None = None
    date: str | None = None
    subject: str | None = None
    depth: Count | None = None
    dirty: bool | None = None


@dataclass(frozen=True, kw_only=True)
class RunFile(Record):
    """A `harness run` JSON: its arm and its runs (each a Run where it has a summary)."""

    runs: list[Table]
    arm: RunArm | None = None
    complete: bool | None = None  # false while runs are still being added
