"""The workload fingerprint: a hash of everything that makes two runs' work the same (suite,
phases with their arrival, clients, prompt and output lengths and sampling, and the prompt texts
themselves). The server's identity (its name, model id, flags) is not in it: two servers with
the same tokenizer get the same prompts and are comparable; runs that differ are never compared."""

from __future__ import annotations

import hashlib
import json

from harness.results.record import to_json
from harness.results.run import Workload
from harness.workload.phase import Phase


def workload(
    suite: str,
    phases: list[tuple[Phase, list[int]]],
    prompts: str | None,
    slo: dict[str, float] | None = None,
) -> dict:
    """The fingerprinted facts; `phases` pairs each phase with its drawn prompt lengths and
    `prompts` is the digest of the prompt texts sent (None when none could be built). The
    suite's SLO, when it has one, too: goodput under other limits is another number."""
    return {
        "suite": suite,
        **({"slo": dict(sorted(slo.items()))} if slo else {}),
        "prompts_sha256": prompts,
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
                # only when set, so that workloads without them keep their fingerprints
                **({"bursts": p.bursts} if p.bursts != 1 else {}),
                **({"burstiness": p.burstiness} if p.burstiness != 1.0 else {}),
                **({"ramp": p.ramp, "ramp_to": p.ramp_to} if p.ramp else {}),
                **({"trace_sha256": p.trace.digest, "time_scale": p.time_scale} if p.trace else {}),
                **({"dataset_sha256": p.dataset.digest} if p.dataset else {}),
                **({"turns": p.turns, "think_time_s": p.think_time_s} if p.turns > 1 else {}),
                **({"followup_tokens": p.followup_tokens} if p.followup_tokens else {}),
                **({"settle_s": p.settle_s} if p.settle_s else {}),
                **(
                    {
                        "cancel_share": p.cancel_share,
                        "cancel_after_tokens": p.cancel_after_tokens,
                        "cancel_after_ms": p.cancel_after_ms,
                    }
                    if p.cancel_share
                    else {}
                ),  # fmt: skip
            }
            for p, lengths in phases
        ],
    }


def prompts_digest(texts: list[str]) -> str:
    """One hash over every prompt text in order: the same tokenizer builds the same texts."""
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def fingerprint(facts: dict) -> str:
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def workload_diff(a: Workload | None, b: Workload | None) -> list[str]:
    """The facts two workloads differ in, named for a person ("prompts_sha256", "phase main:
    clients 4 != 8"): what a fingerprint mismatch is about."""
    a, b = a or Workload(), b or Workload()
    out = [
        f"{key} {getattr(a, key)} != {getattr(b, key)}"
        for key in ("suite", "prompts_sha256")
        if getattr(a, key) != getattr(b, key)
    ]
    pa, pb = a.phases or [], b.phases or []
    if len(pa) != len(pb):
        return [*out, f"{len(pa)} phases != {len(pb)}"]
    for x, y in zip(pa, pb, strict=True):
        fx, fy = to_json(x), to_json(y)  # the facts each phase states
        out += [
            f"phase {x.name}: {key} differs" if key == "prompt_lengths"
            else f"phase {x.name}: {key} {fx.get(key)} != {fy.get(key)}"
            for key in sorted(set(fx) | set(fy))
            if fx.get(key) != fy.get(key)
        ]  # fmt: skip
    return out
