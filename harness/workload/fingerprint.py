"""The workload fingerprint: a hash of everything that makes two runs' work the same (suite,
phases with their arrival, clients, prompt and output lengths and sampling, and the prompt texts
themselves). The server's identity (its name, model id, flags) is not in it: two servers with
the same tokenizer get the same prompts and are comparable; runs that differ are never compared."""

from __future__ import annotations

import hashlib
import json

from harness.results.record import to_json
from harness.results.run import Workload
from harness.workload.arrival import Rate
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
                "arrival": p.arrival.mode,
                "clients": p.clients,
                "requests": p.requests,
                "rate": p.arrival.rate if isinstance(p.arrival, Rate) else None,
                "seed": p.seed,
                "prompt_lengths": lengths,
                "prefix_tokens": p.prefix_tokens,
                "max_tokens": p.max_tokens,
                "ignore_eos": p.ignore_eos,
                "temperature": p.temperature,
                "endpoint": p.endpoint,
                **p.facts(),  # the parts a phase may have, each only when set
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
