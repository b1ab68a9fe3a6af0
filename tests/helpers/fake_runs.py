"""Fake run records shaped like `harness run`'s output, for testing the layers above it."""

from __future__ import annotations

import numpy as np

from harness.results.run import Run

FINGERPRINT = "wl-4c-512p-128o-t0-smollm2"
TTFT_LOGNORMAL_SIGMA = 0.15


def make_run(summary: dict, *, fingerprint: str = FINGERPRINT, valid: bool = True) -> dict:
    """A minimal run record: just what the statistics read."""
    return {
        "summary": dict(summary),
        "valid": valid,
        "invalid_reasons": [] if valid else ["counters: prefill path 'batched' never ran"],
        "fingerprint": fingerprint,
    }


def measured_run(summary: dict) -> Run:
    """What a stubbed `measure` returns: make_run's record, read as the runner reads one."""
    return Run.from_json(make_run(summary))


def make_rounds(arms: dict[str, np.ndarray], metric: str) -> list[dict]:
    """Rounds from per-arm value arrays of one metric (arm -> values per round)."""
    n = len(next(iter(arms.values())))
    return [
        {
            "round": i,
            "order": ["base", "head"] if i % 2 == 0 else ["head", "base"],
            **{arm: make_run({metric: float(v[i])}) for arm, v in arms.items()},
        }
        for i in range(n)
    ]


def realistic_run(
    rng: np.random.Generator, *, ttft_ms: float, tok_s: float, rss_peak: float, commit: str
) -> dict:
    """A full run record: per-request latencies, a 50 Hz RSS timeline with phase marks, counter
    deltas per phase, and the server's and machine's self-description."""
    ttft = ttft_ms * rng.lognormal(0.0, TTFT_LOGNORMAL_SIGMA, 48)
    tpot = 1000.0 / tok_s * 4
    e2e = ttft + 127 * tpot
    requests = [
        {
            "ttft_ms": float(a),
            "e2e_ms": float(b),
            "status": 200,
            "error": None,
            "output_tokens": 128,
        }
        for a, b in zip(ttft, e2e, strict=True)
    ]
    requests.append(
        {"ttft_ms": None, "e2e_ms": 3.0, "status": 503, "error": "queue full", "output_tokens": 0}
    )
    t = np.arange(0.0, 12.0, 0.02)
    floor = 0.55 * rss_peak
    rss = floor * np.clip(t / 1.5, 0.3, 1.0)
    load = (t >= 4.0) & (t < 10.0)
    rss[load] += (rss_peak - floor) * np.abs(np.sin(t[load] * 2.1))
    rss += rng.normal(0, 0.004 * rss_peak, t.size)
    summary = {
        "ttft_p50_ms": float(np.percentile(ttft, 50)),
        "ttft_p95_ms": float(np.percentile(ttft, 95)),
        "ttft_p99_ms": float(np.percentile(ttft, 99)),
        "tpot_ms": tpot,
        "itl_p50_ms": tpot,
        "e2e_p50_ms": float(np.percentile(e2e, 50)),
        "e2e_p95_ms": float(np.percentile(e2e, 95)),
        "tok_s": tok_s * rng.lognormal(0.0, 0.02),
        "req_s": tok_s / 128,
        "errors": 1.0,
        "peak_rss_bytes": rss_peak,
        "peak_rss_sampled_bytes": float(rss.max()),
        "peak_device_bytes": None,
        "startup_s": 1.5 + rng.uniform(0, 0.2),
        "capacity_req_s": 3.92 * rng.lognormal(0.0, 0.02),
    }
    return {
        **make_run(summary),
        "counters": {
            "warmup": {"engine_prefill_forwards_total{path=batched}": 1.0},
            "load": {
                "engine_prefill_forwards_total{path=batched}": float(rng.integers(10, 14)),
                "engine_prefill_rows_spilled_total": 0.0,
                "engine_decode_steps_total": float(rng.integers(1500, 1600)),
            },
        },
        "timeline": {
            "t": t.tolist(),
            "rss": rss.tolist(),
            "marks": [[0.0, "startup"], [2.0, "warmup"], [4.0, "load"], [10.0, "cooldown"]],
        },
        "requests": requests,
        "phases": {
            "load": {
                "window": [4.0, 10.0],
                "windows": [
                    {
                        "from_s": 0.0,
                        "to_s": 6.0,
                        "ttft_p50_ms": float(np.percentile(ttft, 50)),
                        "itl_p50_ms": tpot,
                        "tok_s": tok_s,
                    },
                ],
            }
        },
        "capacity": {
            "mode": "rate",
            "attainment": 0.95,
            "met_level": 4.0,
            "missed_level": 4.4,
            "levels": [
                {"level": v, "attained": a, "met": a >= 0.95, "req_s": v * 0.98}
                for v, a in (
                    (1.0, 1.0),
                    (2.0, 1.0),
                    (4.0, 0.97),
                    (8.0, 0.4),
                    (5.66, 0.8),
                    (4.76, 0.9),
                    (4.36, 0.93),
                )
            ],
            "capacity_req_s": 3.92,
        },
        "arm": {"kind": "project", "reports_commit": True},
        "server": {
            "commit": commit,
            "config": {"parallel": 4, "max_batch_prefill": 4, "max_batch_prefill_tokens": 4096},
            "backend": "torch",
            "model": "smollm2-135m-instruct",
        },
        "machine": {
            "host": "ci-runner-3",
            "cpu": "AMD EPYC 7B13",
            "cores": 2,
            "memory_bytes": 8 * 2**30,
            "os": "Linux 6.8",
            "python": "3.11.9",
        },
    }


def crashed(crash: dict | None):
    """A crash as a saved result holds it, as the record the gate reads."""
    from harness.results.ab_result import Crash

    return Crash.from_json(crash) if crash else None
