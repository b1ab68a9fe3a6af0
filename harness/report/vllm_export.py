"""A run in the shape of vLLM's `vllm bench serve --save-result` JSON, so the tools that read
those files read ours: its totals and throughputs, per-request lists (seconds, as vLLM keeps
them) and `mean_/median_/std_/pNN_` of ttft, tpot, itl and e2el in milliseconds."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from harness.load.record import RequestRecord
from harness.results.record import to_json
from harness.results.run import PhaseFacts, Run

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")


def _stats(name: str, values_ms: list[float]) -> dict[str, float]:
    xs = np.asarray(values_ms or [0.0], dtype=float)  # vLLM reports 0 for no sample
    with np.errstate(all="ignore"):  # a sum past float's range is inf, written as null
        out = {
            f"mean_{name}_ms": float(np.mean(xs)),
            f"median_{name}_ms": float(np.median(xs)),
            f"std_{name}_ms": float(np.std(xs)),
        }
        return out | {f"p{p}_{name}_ms": float(np.percentile(xs, p)) for p in PERCENTILES}


def vllm_result(run: Run, label: str = "servegate") -> dict:
    """One run record (docs/run-json.md) as vLLM's result JSON."""
    records = [RequestRecord.from_dict(to_json(r)) for r in run.requests]
    ok = [r for r in records if r.ok]
    spans: dict[str, tuple[float, float]] = {}
    for r in ok:  # each phase's first send to last completion, as the run's tok_s
        end = r.send if r.end is None else r.end  # an answered request has ended
        lo, hi = spans.get(r.phase, (r.send, end))
        spans[r.phase] = (min(lo, r.send), max(hi, end))
    duration = sum(hi - lo for lo, hi in spans.values()) or 0.0
    output_tokens = sum(r.tokens for r in ok)
    input_tokens = sum(r.prompt_tokens for r in ok)
    per = {
        "ttft": [r.ttft_s * 1e3 for r in ok if r.ttft_s is not None],
        "tpot": [r.tpot_s * 1e3 for r in ok if r.tpot_s is not None],
        "itl": [g * 1e3 for r in ok for g in r.itl_s],
        "e2el": [r.e2e_s * 1e3 for r in ok if r.e2e_s is not None],
    }
    phases = (run.workload.phases if run.workload else None) or [PhaseFacts()]
    first = phases[0]
    started = run.started_at
    result = {
        "date": datetime.fromisoformat(started).strftime("%Y%m%d-%H%M%S") if started else None,
        "backend": "openai-chat" if first.endpoint == "chat" else "openai",
        "label": label,
        "model_id": run.server.served_model if run.server else None,
        "tokenizer_id": run.prompt_tokenizer,
        "num_prompts": len(records),
        "request_rate": first.rate if first.arrival == "rate" else "inf",
        "burstiness": 1.0 if first.burstiness is None else first.burstiness,
        "max_concurrency": first.clients,
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": len(ok) / duration if duration else 0.0,
        "request_goodput": run.summary.get("goodput_req_s"),
        "output_throughput": output_tokens / duration if duration else 0.0,
        "total_token_throughput": (input_tokens + output_tokens) / duration if duration else 0.0,
        "input_lens": [r.prompt_tokens for r in records],
        "output_lens": [r.tokens if r.ok else 0 for r in records],
        "ttfts": [r.ttft_s if r.ok and r.ttft_s is not None else 0.0 for r in records],
        "itls": [list(r.itl_s) if r.ok else [] for r in records],
        "generated_texts": ["" for _ in records],  # the harness keeps no output text
        "errors": [r.error for r in records],
    }
    for name in METRICS:
        result |= _stats(name, per[name])
    return result
