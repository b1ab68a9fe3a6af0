"""sim_run: one suite through `python -m engine.sim` in an arm's checkout, as a run record.

The record has the shape `harness run` writes (docs/run-json.md), so `compare`, `report` and
`ab` read it; its times are the virtual clock's, its memory peaks null (nothing ran), and it
says `simulated` with the cost model's name, source and fit error.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from harness.arms.arms import REPO_ROOT, Arm
from harness.files import strict_json
from harness.load.counters import deltas, parse_metrics
from harness.load.metrics import run_summary
from harness.load.phase import PhaseResult
from harness.load.record import RequestRecord
from harness.results.errors import ComparisonError
from harness.results.record import Count, Record, Table
from harness.results.run import Run, Simulation
from harness.runs.machine import git_commit, harness_version, machine_facts
from harness.runs.measure import SCHEMA, draw_lengths
from harness.runs.validity import judge
from harness.sim.workload import SimError, build
from harness.workload.expect import ExpectContext, evaluate
from harness.workload.fingerprint import fingerprint, workload
from harness.workload.suite import Suite

SIM_TIMEOUT_S = 600


@dataclass(frozen=True, kw_only=True)
class SimRequest(Record):
    """One request as the simulator served it (engine/sim/driver.py's Outcome)."""

    phase: str
    index: Count
    prompt_tokens: Count
    max_tokens: Count
    arrival: float
    send: float
    first_token: float | None = None
    end: float | None = None
    token_times: list[float] = field(default_factory=list)
    output_tokens: Count = 0
    cached_tokens: Count = 0
    finish_reason: str | None = None
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class SimPhase(Record):
    name: str
    start: float
    end: float
    metrics_before: str
    metrics_after: str


@dataclass(frozen=True, kw_only=True)
class SimOutput(Record):
    """What `python -m engine.sim run` prints: every request, each phase's virtual span and
    /metrics text before and after, the cost model (name, source, fit) and the config."""

    requests: list[SimRequest]
    phases: list[SimPhase]
    costs: Table
    mask_bytes_max: Count = 0
    kv_bytes_max: Count | None = None
    model: str | None = None
    config: Table | None = None


def sim_argv(arm: Arm, costs: str, workload: str) -> list[str]:
    """The simulator's command line for `arm` (run in its checkout): what --sim runs, and what
    --dry-run --sim prints."""
    if arm.kind != "project":
        raise SimError("harness sim runs the reference engine's scheduler: a project arm only")
    python = arm.python or sys.executable
    return [python, "-m", "engine.sim", "run", "--workload", workload,
            "--costs", str(costs), "--model", arm.model, *shlex.split(arm.flags)]  # fmt: skip


def simulate(arm: Arm, costs: str, wl: dict) -> SimOutput:
    """Run the engine's simulator on `wl` in the arm's checkout; its result JSON."""
    sim_argv(arm, costs, "")  # a project arm, before any file is written
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(strict_json(wl))
    argv = sim_argv(arm, costs, f.name)
    try:
        done = subprocess.run(argv, cwd=arm.cwd, capture_output=True, text=True,
                              timeout=SIM_TIMEOUT_S, env=None)  # fmt: skip
    finally:
        Path(f.name).unlink(missing_ok=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SimError(f"the simulator failed in {arm.cwd}: {tail}")
    try:
        return SimOutput.from_json(json.loads(done.stdout), "the simulator's output")
    except (ValueError, ComparisonError) as exc:
        raise SimError(f"the simulator in {arm.cwd} printed no result: {exc}") from None


def described(simulated: Simulation) -> Simulation:
    """A run's simulation with its fit error as one phrase, for every report's banner."""
    errors = ", ".join(f"{k} {v.mean_rel_error * 100:.1f}%"
                       for k, v in (simulated.fit or {}).items()
                       if v.mean_rel_error is not None)  # fmt: skip
    return replace(simulated, fit_error=f"mean {errors}" if errors else "n/a (not fitted)")


def _record(r: SimRequest) -> RequestRecord:
    times = r.token_times
    return RequestRecord(
        phase=r.phase, index=r.index, prompt_tokens=r.prompt_tokens,
        max_tokens=r.max_tokens, arrival=r.arrival, send=r.send,
        first_token=r.first_token, end=r.end,
        itl_s=[b - a for a, b in zip(times, times[1:], strict=False)],
        output_tokens=r.output_tokens, client_tokens=len(times),
        usage_prompt_tokens=r.prompt_tokens, status=0 if r.error else 200,
        error=r.error, finish_reason=r.finish_reason, cached_tokens=r.cached_tokens,
    )  # fmt: skip


def sim_run(suite: Suite, arm: Arm, costs: str) -> Run:
    """Simulate `suite` on `arm`'s scheduler; the run, read into its record once (a simulator
    output that breaks it is a SimError)."""
    lengths = {p.name: draw_lengths(p) for p in [*([suite.warmup] if suite.warmup else []),
                                                  *suite.phases]}  # fmt: skip
    wall = time.perf_counter()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    out = simulate(arm, costs, build(suite, lengths))
    wall = time.perf_counter() - wall
    records = [_record(r) for r in out.requests]
    phases = []
    for p, ph in zip(suite.phases, out.phases[-len(suite.phases) :], strict=True):
        result = PhaseResult(p.name, [r for r in records if r.phase == p.name],
                             (ph.start, ph.end))  # fmt: skip
        before, after = parse_metrics(ph.metrics_before), parse_metrics(ph.metrics_after)
        result.counters = deltas(before, after)
        result.expect = evaluate(list(p.expect), ExpectContext(result.counters, after.names))
        result.memory = {"peak_rss_bytes": None, "peak_rss_sampled_bytes": None,
                         "peak_device_bytes": None}  # fmt: skip
        phases.append(result)
    measured = [r for p in phases for r in p.records]
    rates = {p.name: p.max_error_rate for p in suite.phases}
    valid, reasons = judge(phases, None, None, rates, None)
    facts = workload(suite.name, [(p, lengths[p.name]) for p in suite.phases], None, suite.slo)
    model = out.model or arm.model
    simulated = {
        **out.costs,
        "wall_s": round(wall, 3),
        "mask_bytes_max": out.mask_bytes_max,
        "kv_bytes_max": out.kv_bytes_max,
        "model": model,
    }
    run = {
        "schema": SCHEMA,
        "started_at": started_at,
        "duration_s": round(out.phases[-1].end, 3),
        "clock_origin": 0.0,
        "simulated": simulated,
        "suite": {"name": suite.name, "path": str(suite.path), "gate": suite.gate},
        "arm": {**arm.describe(), "simulated": True},
        "outcome": "ok" if valid else "invalid",
        "valid": valid,
        "invalid_reasons": reasons,
        "fingerprint": fingerprint(facts),
        "workload": facts,
        "summary": run_summary(measured, [p.memory for p in phases], None, suite.slo),
        "phases": {p.name: p.as_dict() for p in phases},
        "counters": {p.name: p.counters for p in phases},
        "timeline": {"t": [], "rss": [], "marks": []},
        "sampler": {
            "hz": None,
            "samples": 0,
            "achieved_hz": None,
            "max_gap_s": None,
            "exact_peak": "simulated",
        },  # fmt: skip
        "prompt_tokenizer": "none: token ids of each drawn length (simulated)",
        "prompt_tokens_exact": True,
        "requests": [r.as_dict() for r in measured],
        "warmup_requests": [r.as_dict() for r in records if r.phase == "warmup"],
        "server": {
            "url": None,
            "pid": None,
            "startup_s": None,
            "startup_peak_rss_bytes": None,
            "backend": "sim",
            "model": model,
            "config": out.config,
            "simulated": simulated,
        },  # fmt: skip
        "machine": machine_facts(),
        "harness": {"version": harness_version(), "commit": git_commit(REPO_ROOT)},
    }
    try:
        return Run.from_json(run, "the simulated run")
    except ComparisonError as exc:
        raise SimError(str(exc)) from None
