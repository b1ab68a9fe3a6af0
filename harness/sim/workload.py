"""A suite as the simulator's workload: each request's prompt as token ids, its max_tokens and
when it is sent, grouped as the load driver would send them (docs/simulation.md).

Prompts are seeded token ids of each request's drawn length. What the served prompts share is
kept: a phase's `prefix_tokens` are shared, a trace's hash ids are shared blocks of BLOCK_TOKENS
(whole blocks only, as the load driver builds them), and a chat request is marked `chat`: the
simulator opens it with the tokens its model's chat template puts before every message.
Conversations, datasets of prompts, cancels and settling are not simulated (a suite
with them is refused in one line); a dataset of lengths is.
"""

from __future__ import annotations

import random

from harness.load.arrivals import arrival_offsets
from harness.workload.arrival import Burst, Concurrency, Replay
from harness.workload.phase import Phase
from harness.workload.suite import Suite
from harness.workload.trace import BLOCK_TOKENS

IDS = (3, 250)  # token ids every model here has (tiny's vocabulary is 259)


class SimError(ValueError):
    """A suite the simulator cannot run; one line."""


def _ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randint(*IDS) for _ in range(n)]


def prompts(phase: Phase, lengths: list[int]) -> list[list[int]]:
    rng = random.Random(phase.seed * 7919 + 17)
    shared = _ids(random.Random(phase.seed + 2), phase.prefix_tokens)
    if isinstance(phase.arrival, Replay):
        out = []
        for req in phase.arrival.trace.requests:
            whole = [h for k, h in enumerate(req.hash_ids)
                     if (k + 1) * BLOCK_TOKENS < req.input_length]  # fmt: skip
            ids = [t for h in whole for t in _ids(random.Random(h), BLOCK_TOKENS)]
            out.append(ids + _ids(rng, req.input_length - len(ids)))
        return out
    return [(shared + _ids(rng, max(1, n - len(shared))))[: max(n, 1)] for n in lengths]


def groups(phase: Phase, lengths: list[int]) -> list[dict]:
    if phase.turns > 1 or (phase.dataset is not None and not phase.dataset.lengths_only):
        raise SimError(
            f"phase {phase.name!r}: conversations and datasets of prompts are not simulated"
        )
    parts = (("cancel_share", phase.cancels), ("settle_s", phase.settle_s))
    if unsimulated := [key for key, part in parts if part]:  # cancels; a settling start
        raise SimError(f"phase {phase.name!r}: {', '.join(unsimulated)} is not simulated (the "
                       "simulator sends every request whole, from the phase's start)")  # fmt: skip
    ids = prompts(phase, lengths)
    trace = phase.arrival.trace if isinstance(phase.arrival, Replay) else None
    outs = [r.output_length for r in trace.requests] if trace else None
    if phase.dataset is not None:  # a length distribution: each row's output, capped
        rows = phase.dataset.sample(phase.total_requests, phase.seed)
        outs = [min(r.output_length or phase.max_tokens, phase.max_tokens) for r in rows]
    reqs = [{"prompt": p, "max_tokens": outs[i] if outs else phase.max_tokens,
             "ignore_eos": phase.ignore_eos, "chat": phase.endpoint == "chat"}
            for i, p in enumerate(ids)]  # fmt: skip
    if isinstance(phase.arrival, Burst):
        n = phase.requests
        return [{"mode": "closed", "clients": n, "requests": reqs[b * n : (b + 1) * n]}
                for b in range(phase.bursts)]  # fmt: skip
    if isinstance(phase.arrival, Concurrency):
        return [{"mode": "closed", "clients": phase.clients, "requests": reqs}]
    for req, at in zip(reqs, arrival_offsets(phase) or [], strict=True):
        req["at"] = at
    return [{"mode": "open", "requests": reqs}]


def build(suite: Suite, lengths: dict[str, list[int]]) -> dict:
    """The workload of `suite` (its warm-up first); `lengths`: each phase's drawn lengths."""
    phases = [suite.warmup] if suite.warmup else []
    phases += list(suite.phases)
    return {"phases": [{"name": p.name, "groups": groups(p, lengths[p.name])} for p in phases]}
