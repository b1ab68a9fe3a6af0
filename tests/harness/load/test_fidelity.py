"""Measurement fidelity against the scripted server, whose delays and allocations are known:
TTFT at 32 concurrent streams, and a short allocation spike in the exact per-phase peak."""

from __future__ import annotations

import json
import statistics

from harness.arms.arms import make_arm
from harness.runs.measure import run_arm
from harness.workload.suite import load_suite

from helpers.arms import scripted
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

MIB = 1 << 20
TTFT_MS = 150.0
ITL_MS = 200.0  # a first token stamped at the next token's read is this late
STREAMS = 32

TTFT_SUITE = f"""
model = "scripted"
[warmup]
clients = {STREAMS}
requests = {STREAMS}
prompt_tokens = 8
max_tokens = 2
[[phase]]
name = "streams"
arrival = "burst"
clients = {STREAMS}
requests = {STREAMS}
prompt_tokens = 32
max_tokens = 4
[phase.expect]
"engine_decode_steps_total" = "=={STREAMS * 4}"
"""

SPIKE_SUITE = """
model = "scripted"
[warmup]
requests = 1
max_tokens = 2
[[phase]]
name = "calm"
requests = 2
max_tokens = 2
[[phase]]
name = "spiky"
requests = 2
max_tokens = 2
"""


def measure_ttft(tmp_path, suite, marker: str, attempt: int) -> tuple[list[float], list[float]]:
    """One run of 32 streams; per request, the harness's stamping lag and the residual of
    measured TTFT minus (scripted delay + the server's own admission delay), in ms."""
    timing = tmp_path / f"timing{attempt}.jsonl"
    cmd = scripted(f"--ttft-ms {TTFT_MS} --itl-ms {ITL_MS} --timing-log {timing}", model=marker)
    run = run_arm(suite, make_arm(marker, serve_cmd=cmd), tmp_path / f"s{attempt}.log")
    assert not wait_no_survivors(marker)
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    reqs = run["requests"]
    assert len(reqs) == STREAMS and all(r["ok"] for r in reqs)
    # The server sends an empty chunk at once: counting it would put TTFT near 0.
    assert min(r["ttft_ms"] for r in reqs) >= TTFT_MS - 1.0
    server = {e["id"]: e for e in map(json.loads, timing.read_text().splitlines())}
    origin = run["clock_origin"]  # the same monotonic clock as the server's perf_counter
    stamp_lag, residual = [], []
    for r in reqs:
        s = server[r["response_id"]]
        stamp_lag.append((origin + r["first_token"] - s["first_token"]) * 1e3)
        admission = (s["arrived"] - (origin + r["send"])) * 1e3
        residual.append(r["ttft_ms"] - TTFT_MS - admission)
    assert min(stamp_lag) > -0.5, "a first token stamped before the server wrote it"
    assert min(residual) > -0.5, sorted(residual)
    return stamp_lag, residual


def test_ttft_is_stamped_at_the_first_tokens_write_at_32_streams(tmp_path):
    """Measured TTFT = scripted delay + the server's admission delay, each first token stamped
    as it came, not at a later token (200 ms on): within 50 ms at the median, ten times the
    5 ms a loaded 2-core machine stays under (1-3 ms quiet, docs/measurement.md). Scheduling
    noise from other work on the machine can only add delay, so the best of three runs is
    judged; every run must pass the structural checks."""
    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, TTFT_SUITE)))
    medians = []
    for attempt in range(3):
        stamp_lag, residual = measure_ttft(tmp_path, suite, marker, attempt)
        medians.append((statistics.median(residual), statistics.median(stamp_lag)))
        if max(medians[-1]) < 50.0:
            break
    assert min(max(m) for m in medians) < 50.0, medians


def test_spike_shows_in_the_exact_peak_of_its_phase_only(tmp_path):
    marker = unique_marker()
    # --keep-peak: like vLLM and llama.cpp, the server resets no peak of its own; the
    # harness's VmHWM reset at each phase start is what keeps the warm-up's spike out of "calm"
    cmd = scripted(
        "--spike-mb 200 --spike-ms 30 --spike-at 1,4 --device-peak 4096 --keep-peak", model=marker
    )
    suite = load_suite(str(write_suite(tmp_path, SPIKE_SUITE)))
    run = run_arm(suite, make_arm(marker, serve_cmd=cmd), tmp_path / "s.log")
    assert not wait_no_survivors(marker)
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    calm, spiky = run["phases"]["calm"]["memory"], run["phases"]["spiky"]["memory"]
    assert calm["peak_rss_source"] == spiky["peak_rss_source"] == "VmHWM"
    # Reset at phase start: the warm-up's spike does not leak into "calm".
    assert calm["peak_rss_bytes"] < calm["server_memory"]["rss_bytes"] + 100 * MIB
    assert spiky["peak_rss_bytes"] >= spiky["server_memory"]["rss_bytes"] + 190 * MIB
    assert run["summary"]["peak_rss_bytes"] == spiky["peak_rss_bytes"]
    # Whether the 100 Hz timeline caught a ~35 ms spike is recorded, not assumed.
    assert isinstance(spiky["sampled_caught_peak"], bool)
    assert 0 < spiky["sampled_over_exact"] <= 1.05
    assert spiky["sampled_caught_peak"] == (spiky["sampled_over_exact"] >= 0.9)
    timeline = run["timeline"]
    assert [m[1] for m in timeline["marks"]] == ["warmup", "calm", "spiky", "end"]
    # aims at 100 Hz in its own process: a tenth of that on any machine, not one a second
    assert len(timeline["t"]) / (timeline["t"][-1] - timeline["t"][0]) > 10
    sampler = run["sampler"]  # what it achieved is recorded, from the timeline itself
    assert sampler["achieved_hz"] == round(
        (len(timeline["t"]) - 1) / (timeline["t"][-1] - timeline["t"][0]), 1
    )
    assert 0 < sampler["max_gap_s"] < timeline["t"][-1] - timeline["t"][0]
    assert run["summary"]["peak_device_bytes"] == 4096
    assert spiky["peak_device_source"] == "server /v1/memory"
