"""The workload fingerprint: a hash of everything that makes two runs' work the same (prompt and
output lengths, sampling, arrival and concurrency, model, phases). Runs that differ are never
compared."""

from __future__ import annotations

import hashlib
import json

from harness.suite import Phase


def workload(model: str, phases: list[tuple[Phase, list[int]]]) -> dict:
    """The fingerprinted facts; `phases` pairs each phase with its drawn prompt lengths."""
    return {
        "model": model,
        "phases": [
            {
                "name": p.name,
                "arrival": p.arrival,
                "clients": p.clients,
                "requests": p.requests,
                "rate": p.rate,
                "seed": p.seed,
                "prompt_lengths": lengths,
                "prefix_tokens": p.prefix_tokens,
                "max_tokens": p.max_tokens,
                "ignore_eos": p.ignore_eos,
                "temperature": p.temperature,
                "endpoint": p.endpoint,
                # only when set, so that one-burst workloads keep their earlier fingerprints
                **({"bursts": p.bursts} if p.bursts != 1 else {}),
            }
            for p, lengths in phases
        ],
    }


def fingerprint(facts: dict) -> str:
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
