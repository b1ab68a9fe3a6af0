"""`run_arm`: start one arm cold, drive the suite's phases, and return the run record (the dict
that docs/run-json.md describes). `harness run` and `harness ab` both call it."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from harness.arms.arms import REPO_ROOT, Arm
from harness.arms.launcher import Launcher, LaunchError, Server, log_tail, wait_ready
from harness.load import event_loop
from harness.load.arrivals import arrival_offsets, offered_rate
from harness.load.baton import Baton
from harness.load.counters import MetricsEndpoint
from harness.load.gauges import GaugeWatch
from harness.load.load import LoadDriver, make_session
from harness.load.memory_peaks import HWM_SUPPORTED, MemoryEndpoint, read_hwm
from harness.load.memory_timeline import Sampler, Timeline
from harness.load.metrics import latency_stats, run_summary
from harness.load.phase import PhaseResult, Probes, Progress, run_phase
from harness.load.prompts import (
    PromptError,
    TokenCounter,
    build_prompts,
    build_trace_prompts,
    dataset_prompts,
)
from harness.load.server_reads import fetch_json
from harness.load.workers import client_workers, procs_for
from harness.results.store import schema
from harness.runs.machine import git_commit, harness_version, machine_facts
from harness.runs.validity import judge
from harness.workload.arrival import Replay
from harness.workload.capacity import CapacityPlan, Tried, attained, capacity_summary, next_level
from harness.workload.fingerprint import fingerprint, prompts_digest, workload
from harness.workload.levels import level_phase
from harness.workload.phase import Phase
from harness.workload.suite import Suite

SCHEMA = schema("run")
LEVEL_STATS = ("requests", "ok", "ttft_p95_ms", "tpot_ms", "e2e_p95_ms", "goodput_req_s")
HEALTH_FIELDS = ("commit", "version", "model", "backend", "device", "dtype", "runtime", "config")


@dataclass(slots=True)
class Started:
    """An arm's server launched and ready ahead of its run: `harness ab` starts a round's arms
    together, then measures them one at a time (docs/measurement.md, "Cold starts")."""

    launcher: Launcher
    server: Server
    t0: float  # perf_counter at launch: the run's clock origin


def start_arm(
    arm: Arm, log_path: Path, ready_timeout_s: float | None = None, progress: Progress | None = None
) -> Started:
    """Launch `arm` cold and wait until it is ready; LaunchError (nothing left running) if not."""
    t0 = time.perf_counter()
    launcher = Launcher(arm, log_path, ready_timeout_s, starting=(progress or Progress()).starting)
    return Started(launcher, launcher.__enter__(), t0)


def draw_lengths(phase: Phase) -> list[int]:
    """Each request's prompt length: the trace's, else drawn from the phase's seed."""
    if isinstance(phase.arrival, Replay):
        return [r.input_length for r in phase.arrival.trace.requests]
    if phase.dataset is not None and phase.dataset.lengths_only:
        rows = phase.dataset.sample(phase.total_requests, phase.seed)
        return [n for item in rows if (n := item.input_length) is not None]  # each has one
    if phase.dataset is not None:  # the server's tokenizer counts them: prompts_sha256 holds them
        return []
    lengths = phase.prompt_tokens.sample(random.Random(phase.seed), phase.total_requests)
    followup = phase.conversation.followup_tokens if phase.conversation else None
    if followup is not None:  # a conversation's later user messages
        lengths = [n if i % phase.turns == 0 else followup for i, n in enumerate(lengths)]
    return lengths


def run_arm(
    suite: Suite,
    arm: Arm,
    log_path: Path,
    progress: Progress | None = None,
    sample_hz: float = 100.0,
    ready_timeout_s: float | None = None,
    started: Started | None = None,
    baton: tuple[Baton, str] | None = None,
) -> dict:
    """Run `suite` once against `arm`, from a cold start (`started`: a server start_arm
    launched, not yet sent a request), and return the run record; the server is stopped at
    the end either way. With a `baton` (shared, and this arm's name) its bursts take turns
    with other arms measured at once. Raises LaunchError when the server never became ready;
    a crash under load, failed expectations and failed requests are reported in the record."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    machine = machine_facts()
    driven = _drive_cold(
        suite, arm, log_path, progress or Progress(), sample_hz, ready_timeout_s, started, baton
    )
    return _run_record(suite, arm, log_path, driven, started_at, machine)


@dataclass(slots=True)
class Driven:
    """What one cold run measured, before it is written up as the run record."""

    t0: float
    server: Server
    phases: list[PhaseResult]
    warmup: PhaseResult | None
    extras: dict[str, Any]
    sampler: Sampler | None
    timeline: Timeline | None  # None without a pid to sample
    startup_peak: int | None
    launched: bool
    exit_code: int | None  # set when the server it launched exited under load


def _drive_cold(
    suite: Suite,
    arm: Arm,
    log_path: Path,
    progress: Progress,
    sample_hz: float,
    ready_timeout_s: float | None,
    started: Started | None,
    baton: tuple[Baton, str] | None,
) -> Driven:
    """Start (or take over, or attach to) the server, sample its memory, drive the suite, and
    stop it whatever happens."""
    t0 = started.t0 if started else time.perf_counter()
    launcher = (
        started.launcher
        if started
        else (
            Launcher(arm, log_path, ready_timeout_s, starting=progress.starting)
            if arm.launches
            else None
        )
    )
    sampler, exit_code, startup_peak = None, None, None
    try:
        if started:
            server = started.server
        else:
            server = (
                launcher.__enter__()
                if launcher
                else _attach(arm, ready_timeout_s or arm.ready_timeout_s)
            )
        if server.pid is not None:
            sampler = Sampler(server.pid, t0, sample_hz).start()
            if launcher:  # its tree's high-water mark before any phase resets it: loading's
                startup_peak = read_hwm(sampler.tree())
        drive = _drive(suite, arm, server, sampler, launcher, progress, t0, baton)
        phases, warmup, extras = event_loop.run(drive)
    finally:
        if baton:  # no teardown of ours inside another arm's measured burst
            baton[0].finish(baton[1])
            baton[0].wait_all()
        timeline = sampler.stop() if sampler else None
        if launcher:
            launcher.remember(list(sampler.seen.values()) if sampler else [])
            exit_code = launcher.exit_code()
            launcher.stop()
    return Driven(t0, server, phases, warmup, extras, sampler, timeline, startup_peak,
                  launcher is not None, exit_code)  # fmt: skip


def _run_record(
    suite: Suite, arm: Arm, log_path: Path, d: Driven, started_at: str, machine: dict
) -> dict:
    """The run record (docs/run-json.md) of what `d` measured: judged, fingerprinted and
    summarised."""
    crashed = d.launched and d.exit_code is not None
    phases, server, extras, timeline = d.phases, d.server, d.extras, d.timeline
    records = [r for p in phases for r in p.records]
    rates = {p.name: p.max_error_rate for p in suite.phases}
    late = {p.name: p.max_lateness_ms for p in suite.phases if p.arrival.open_loop}
    valid, reasons = judge(
        phases, extras.get("error"), d.exit_code if crashed else None, rates, late
    )
    lengths = [(p, draw_lengths(p)) for p in suite.phases]
    facts = workload(suite.name, lengths, extras.get("prompts_sha256"), suite.slo)
    server_info = {
        "url": server.url,
        "pid": server.pid,
        "startup_s": server.startup_s,
        "startup_peak_rss_bytes": d.startup_peak,
        "device_memory_life": timeline.device_peaks() if timeline else None,
        "ready_path": server.ready_path,
        "health": server.health,
        **{k: server.health.get(k) for k in HEALTH_FIELDS},
        "served_model": extras.get("served_model"),
        "log_path": str(log_path) if d.launched else None,
        "exit_code": d.exit_code if crashed else None,
        "log_tail": log_tail(log_path) if crashed else None,
    }
    return {
        "schema": SCHEMA,
        "started_at": started_at,
        "duration_s": round(time.perf_counter() - d.t0, 3),
        "clock_origin": d.t0,
        "suite": {"name": suite.name, "path": str(suite.path), "gate": suite.gate},
        "arm": arm.describe(),
        "outcome": "crashed" if crashed else ("ok" if valid else "invalid"),
        "valid": valid,
        "invalid_reasons": reasons,
        "fingerprint": fingerprint(facts),
        "workload": facts,
        "summary": run_summary(
            [r for p in phases for r in p.measured],
            [p.memory for p in phases],
            server.startup_s,
            suite.slo,
            d.startup_peak,
            {p.name: p.paused_s for p in phases},
        )
        | {"capacity_req_s": (extras.get("capacity") or {}).get("capacity_req_s")},
        "capacity": extras.get("capacity"),
        "phases": {p.name: p.as_dict() for p in phases},
        "counters": {p.name: p.counters for p in phases},
        "timeline": timeline.as_dict() if timeline else {"t": [], "rss": [], "marks": []},
        "sampler": {
            "hz": d.sampler.hz if d.sampler else None,
            "samples": len(timeline.t) if timeline else 0,
            **(timeline.achieved() if timeline else {"achieved_hz": None, "max_gap_s": None}),
            "exact_peak": "VmHWM" if HWM_SUPPORTED and d.sampler else "unavailable",
        },
        "prompt_tokenizer": extras.get("tokenizer"),
        "prompt_tokens_exact": extras.get("exact", False),
        "requests": [r.as_dict() for r in records],
        "warmup_requests": [r.as_dict() for r in (d.warmup.records if d.warmup else [])],
        "server": server_info,
        "machine": machine,
        "harness": {"version": harness_version(), "commit": git_commit(REPO_ROOT)},
    }


def _attach(arm: Arm, timeout_s: float) -> Server:
    """An already running server (--url): check it answers, and that --pid exists."""
    if arm.pid is not None and not psutil.pid_exists(arm.pid):
        raise LaunchError(f"--pid {arm.pid}: no such process")
    if arm.url is None:
        raise LaunchError("no --url to attach to")
    deadline = time.monotonic() + min(timeout_s, 15.0)
    path, health = wait_ready(arm.url, deadline, path=arm.ready_path, api_key=arm.api_key)
    return Server(arm.url, arm.pid, None, health, path)


def _exit_probe(arm: Arm, launcher: Launcher | None) -> Callable[[], bool]:
    """Whether the server is gone: our child exited, or the --pid no longer exists."""
    if launcher is not None:
        return lambda: launcher.exit_code() is not None
    if arm.pid is not None:
        return lambda: not psutil.pid_exists(arm.pid)
    return lambda: False


async def _drive(
    suite: Suite,
    arm: Arm,
    server: Server,
    sampler: Sampler | None,
    launcher: Launcher | None,
    progress: Progress,
    t0: float,
    baton: tuple[Baton, str] | None = None,
) -> tuple[list[PhaseResult], PhaseResult | None, dict]:
    exited = _exit_probe(arm, launcher)
    clients = max(p.clients for p in suite.phases)
    async with make_session(clients, api_key=arm.api_key) as session:
        model = await served_model(session, server.url, arm.model)
        counter = TokenCounter(session, server.url, model)
        extras: dict[str, Any] = {"served_model": model, "tokenizer": await counter.detect()}
        with client_workers(procs_for(suite), server.url, model, t0, clients,
                            arm.api_key) as workers:  # fmt: skip
            driver = LoadDriver(session, server.url, model, t0, baton, workers)
            metrics = MetricsEndpoint(session, server.url)
            gauges = GaugeWatch(metrics, arm.gauges, arm.gauge_scale) if arm.gauges else None
            probes = Probes(
                driver, metrics, MemoryEndpoint(session, server.url), sampler,
                arm.strict_counters, exited, gauges,
            )  # fmt: skip
            plan = ([suite.warmup] if suite.warmup else []) + list(suite.phases)
            try:
                prompts = {p.name: await _prompts(counter, p) for p in plan}
            except PromptError as exc:
                return [], None, extras | {"error": f"prompts: {exc}"}
            chat = any(p.endpoint == "chat" for p in plan)
            extras["tokenizer"] += counter.chat_note(chat)
            extras["exact"] = counter.exact(chat)
            extras["prompts_sha256"] = prompts_digest(
                [q.text for p in suite.phases for q in prompts[p.name]]
            )
            warmup = None
            if suite.warmup:
                warmup = await run_phase(probes, suite.warmup, prompts["warmup"], progress, False)
            results = []
            for phase in suite.phases:
                if exited():
                    break
                results.append(await run_phase(probes, phase, prompts[phase.name], progress))
            if suite.capacity and results and not exited():
                extras["capacity"] = await _find_capacity(
                    probes, suite, suite.capacity, counter, progress, exited
                )
            if sampler:
                sampler.mark("end")
            return results, warmup, extras


async def _find_capacity(probes: Probes, suite: Suite, plan: CapacityPlan, counter: TokenCounter,
                         progress: Progress, exited: Callable[[], bool]) -> dict:  # fmt: skip
    """The suite's capacity search on the running server, a level at a time (its first phase
    reshaped, without its expectations); what it kept (workload/capacity.py)."""
    stopped = None
    tried: list = []
    stats: list[dict] = []
    ends = time.monotonic() + plan.budget_s
    while (level := next_level(plan, tried)) is not None and not exited():
        if (left := ends - time.monotonic()) <= 1:  # the bracket so far; every level kept
            stopped = f"its time budget ({plan.budget_s:g} s) was spent"
            break
        shape = level_phase(suite.phases[0], plan.mode, level)
        timeout = min(shape.phase_timeout_s, left)  # a level cannot outlast the search
        phase = replace(shape, name=f"capacity-{shape.name}", expect=(), phase_timeout_s=timeout)
        try:
            prompts = await _prompts(counter, phase)
        except PromptError as exc:
            return {"error": f"capacity prompts: {exc}"}
        result = await run_phase(probes, phase, prompts, progress, measured=False)
        got = latency_stats(result.measured, suite.slo, {phase.name: result.paused_s})
        tried.append(Tried(level, attained(got), got["req_s"]))
        offsets = arrival_offsets(phase)  # a rate level offers what it is labelled with
        offered = offered_rate(offsets) if offsets else None
        stats.append({k: got.get(k) for k in LEVEL_STATS} | {"offered_req_s": offered})
    found = capacity_summary(plan, tried) | {"stopped": stopped}
    for level, kept in zip(found["levels"], stats, strict=True):
        level |= kept
    return found


async def _prompts(counter: TokenCounter, phase: Phase) -> list:
    chat = phase.endpoint == "chat"
    if isinstance(phase.arrival, Replay):
        return await build_trace_prompts(counter, phase.arrival.trace, phase.seed, chat)
    if phase.dataset is not None:
        items = phase.dataset.sample(phase.total_requests, phase.seed)
        return await dataset_prompts(counter, items, chat, phase.max_tokens, phase.seed)
    return await build_prompts(counter, draw_lengths(phase), phase.prefix_tokens, phase.seed, chat)


async def served_model(session: aiohttp.ClientSession, base: str, wanted: str) -> str:
    """The model id to send: `wanted` if the server lists it, else its only model, else wanted."""
    try:
        _, data = await fetch_json(session, "GET", base + "/v1/models")
        ids = [
            m["id"]
            for m in data.get("data", [])
            if isinstance(m, dict) and isinstance(m.get("id"), str)
        ]
    except (ValueError, AttributeError, TypeError):
        return wanted  # a server without /v1/models still gets the model the suite names
    if wanted in ids or len(ids) != 1:
        return wanted
    return ids[0]
