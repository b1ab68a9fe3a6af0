"""Per-request records -> the summary scalars of a phase and of a run (pandas). The definitions
are in docs/measurement.md; percentiles interpolate linearly between order statistics."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.load.record import RequestRecord
from harness.results.metrics import CATALOGUE, SUMMARY_KEYS

if TYPE_CHECKING:  # imported where used: a second of import that `harness --help` need not pay
    import pandas as pd

SLO_COLUMNS = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "e2e_ms": "e2e_ms"}


def frame(records: list[RequestRecord]) -> pd.DataFrame:
    import pandas as pd

    rows = [
        {
            "phase": r.phase,
            "ok": r.ok,
            "cancelled": r.cancelled,
            "send": r.send,
            "end": r.end,
            "queue_ms": r.queue_s * 1e3,
            "ttft_ms": _ms(r.ttft_s),
            "e2e_ms": _ms(r.e2e_s),
            "tpot_ms": _ms(r.tpot_s),
            "tokens": r.tokens,
            "mismatch": r.token_mismatch,
            "usage_missing": r.output_tokens is None,
        }
        for r in records
    ]
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else ["phase", "ok"])


def goodput(ok: pd.DataFrame, slo: dict[str, float], span: float) -> float | None:
    """Requests per second that met every limit in `slo` (DistServe's goodput, as vLLM's
    `--goodput` counts it): a request without a value a limit needs (no TPOT for one token)
    is held to the others. None without limits or without a span."""
    if not slo or span <= 0:
        return None
    import pandas as pd

    met = pd.Series(True, index=ok.index)
    for key, limit in slo.items():
        values = ok[SLO_COLUMNS[key]]
        met &= values.isna() | (values <= limit)
    return float(met.sum()) / span


def latency_stats(
    records: list[RequestRecord],
    slo: dict[str, float] | None = None,
    paused: dict[str, float] | None = None,
) -> dict:
    """Latency, throughput and error scalars over `records` (any number of phases).
    tok_s, req_s and goodput divide by the sum of each phase's span (first send -> last
    completion), less the seconds it `paused` between bursts for other arms' turns."""
    import pandas as pd

    df = frame(records)
    ok = df[df["ok"]] if len(df) else df
    itl = pd.Series([g * 1e3 for r in records if r.ok for g in r.itl_s], dtype=float)
    columns = {c: ok[c].dropna() for c in ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms") if len(ok)}
    columns["itl_ms"] = itl
    paused = paused or {}
    span = sum(
        _span(df[df["phase"] == name]) - paused.get(name, 0.0)
        for name in dict.fromkeys(df.get("phase", []))
    )
    tokens = int(ok["tokens"].sum()) if len(ok) else 0
    return {
        "requests": len(df),
        "ok": len(ok),
        "errors": int((~df["ok"] & ~df["cancelled"]).sum()) if len(df) else 0,
        "cancelled": int(df["cancelled"].sum()) if len(df) else 0,
        **{m.name: _q(columns.get(m.column), m.quantile) for m in CATALOGUE if m.column},
        "output_tokens": tokens,
        "tok_s": tokens / span if span > 0 else None,
        "req_s": len(ok) / span if span > 0 else None,
        "goodput_req_s": goodput(ok, slo or {}, span) if len(ok) else None,
        "cached_tokens_mean": _mean(r.cached_tokens for r in records if r.ok),
        "served_prompt_tokens_mean": _mean(r.usage_prompt_tokens for r in records if r.ok),
        "token_mismatches": int(df["mismatch"].sum()) if len(df) else 0,
        "usage_missing": int(ok["usage_missing"].sum()) if len(ok) else 0,
    }


WINDOW_S = 10.0  # the width of a phase's time slices


def token_times(r: RequestRecord) -> list[float]:
    """When the client read each of a request's tokens (run clock): the first token's read,
    then one per ITL gap; tokens that came in the first read share its time."""
    if r.first_token is None:
        return []
    times, t = [r.first_token] * max(r.client_tokens - len(r.itl_s), 1), r.first_token
    for gap in r.itl_s:
        t += gap
        times.append(t)
    return times


def time_windows(
    records: list[RequestRecord], start: float, end: float, width: float = WINDOW_S
) -> list[dict]:
    """A phase's latencies per slice of `width` seconds from its start (the last one ends with
    the phase), so that warm-up and drift show: each slice's requests by the time they were
    sent (TTFT p50, TPOT median, errors), its gaps and tokens by the time they were read (ITL
    p50, tok/s). Slices in which nothing was sent or read are left out."""
    from statistics import median

    def k(t: float) -> int:
        return max(int((t - start) // width), 0)

    slices: dict[int, dict] = {}

    def at(i: int) -> dict:
        return slices.setdefault(i, {"ttft": [], "tpot": [], "itl": [], "tokens": 0, "sent": 0,
                                     "errors": 0})  # fmt: skip

    for r in records:
        s = at(k(r.send))
        s["sent"] += 1
        if not r.ok:
            s["errors"] += r.failed
            continue
        if r.ttft_s is not None:
            s["ttft"].append(r.ttft_s * 1e3)
        if r.tpot_s is not None:
            s["tpot"].append(r.tpot_s * 1e3)
        times = token_times(r)
        for t in times:
            at(k(t))["tokens"] += 1
        for t, gap in zip(times[len(times) - len(r.itl_s) :], r.itl_s, strict=True):
            at(k(t))["itl"].append(gap * 1e3)

    def mid(values: list[float]) -> float | None:
        return round(median(values), 3) if values else None

    out = []
    for i, s in sorted(slices.items()):
        to = max(min((i + 1) * width, end - start), i * width + 1e-3)
        out.append({
            "from_s": i * width, "to_s": round(to, 3), "sent": s["sent"], "errors": s["errors"],
            "ttft_p50_ms": mid(s["ttft"]), "tpot_ms": mid(s["tpot"]),
            "itl_p50_ms": mid(s["itl"]), "tok_s": round(s["tokens"] / (to - i * width), 3),
        })  # fmt: skip
    return out


def run_summary(
    records: list[RequestRecord],
    phase_memory: list[dict],
    startup_s: float | None,
    slo: dict[str, float] | None = None,
    startup_peak: int | None = None,
    paused: dict[str, float] | None = None,
) -> dict:
    """The run's `summary`: latency over every measured request, memory peaks as the max over
    phases (None when no phase knew the value), goodput against the suite's `slo`, and the
    server's start: seconds to ready and its tree's RSS high-water mark when it got there."""
    stats = latency_stats(records, slo, paused)
    summary = {k: stats[k] for k in SUMMARY_KEYS if k in stats}
    summary["peak_rss_bytes"] = _max(m.get("peak_rss_bytes") for m in phase_memory)
    summary["peak_rss_sampled_bytes"] = _max(m.get("peak_rss_sampled_bytes") for m in phase_memory)
    summary["peak_device_bytes"] = _max(m.get("peak_device_bytes") for m in phase_memory)
    summary["startup_s"] = startup_s
    summary["startup_peak_rss_bytes"] = startup_peak
    return {k: summary.get(k) for k in SUMMARY_KEYS}


def _span(df: pd.DataFrame) -> float:
    ok = df[df["ok"]]
    if not len(ok):
        return 0.0
    return float(ok["end"].max() - df["send"].min())


def _q(values: pd.Series | None, q: float) -> float | None:
    return float(values.quantile(q)) if values is not None and len(values) else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _mean(values) -> float | None:
    """The mean of the values a server reported (None when it reported none)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _max(values) -> int | None:
    known = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return max(known) if known else None
