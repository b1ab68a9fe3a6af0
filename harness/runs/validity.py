"""Whether a run is valid evidence: the server stayed up, prompts were built, every phase
served requests and showed the counter movements its suite expects, and the client kept up."""

from __future__ import annotations

from harness.load.client_check import client_fell_behind
from harness.load.load import DEADLINE
from harness.load.phase import PhaseResult
from harness.load.stream import OVER_LONG


def judge(
    phases: list[PhaseResult],
    error: str | None,
    exit_code: int | None,
    max_error_rate: dict[str, float] | None = None,
    max_lateness_ms: dict[str, float] | None = None,
) -> tuple[bool, list[str]]:
    """Return (valid, reasons); each reason is one line a person can act on. A phase may
    lose up to its suite's `max_error_rate` of requests (default half) and stay valid, but not
    one to a deadline or to a stream longer than its max_tokens. An open loop (a rate, a trace)
    whose sends fell behind their schedule by more than `max_lateness_ms` (p99) did not offer
    the load it names."""
    reasons = []
    if exit_code is not None:
        where = f" during phase {phases[-1].name!r}" if phases else ""
        reasons.append(f"server exited with code {exit_code}{where}")
    if error:
        reasons.append(error)
    if not phases and not reasons:
        reasons.append("no phase ran")
    for phase in phases:
        broken = [r for r in phase.records if DEADLINE in r.error or OVER_LONG in r.error]
        if broken:  # a server that never finishes or never stops is not measured, at any rate
            reasons.append(f"phase {phase.name!r}: {len(broken)} request(s): {broken[0].error}")
        failed = [r for r in phase.records if r.failed]
        allowed = (max_error_rate or {}).get(phase.name, 0.5)
        if phase.records and len(failed) > allowed * len(phase.records):
            n, total = len(failed), len(phase.records)
            share = "all" if n == total else f"{n} of"
            reasons.append(
                f"phase {phase.name!r}: {share} {total} requests failed (the suite allows "
                f"{allowed:.0%}; first: {failed[0].error or 'HTTP ' + str(failed[0].status)})"
            )
        bound = (max_lateness_ms or {}).get(phase.name)
        late = sorted((r.send - r.arrival) * 1e3 for r in phase.records if r.status or r.ok)
        if bound is not None and late:
            p99 = late[min(len(late) - 1, int(0.99 * len(late)))]
            if p99 > bound:
                reasons.append(
                    f"phase {phase.name!r}: the client fell behind its schedule: p99 send "
                    f"lateness {p99:.1f} ms > {bound:g} ms (max_lateness_ms), so the load it "
                    "names was not offered; more clients, more client processes or a lower rate"
                )
        if phase.records and not phase.measured:
            reasons.append(
                f"phase {phase.name!r}: every request was sent within its settle_s, none measured"
            )
        itl = sorted(g for r in phase.records if r.ok for g in r.itl_s)
        itl_p50_ms = itl[len(itl) // 2] * 1e3 if itl else None
        if late_client := client_fell_behind(phase.name, phase.client, itl_p50_ms):
            reasons.append(late_client)
        for outcome in phase.expect:
            if outcome.status != "fail":
                continue
            rule = outcome.rule
            got = outcome.note or f"delta was {outcome.delta:g}"
            reasons.append(
                f"phase {phase.name!r}: expected {rule.series} {rule.op} {rule.value:g}, {got}"
            )
    return not reasons, reasons
