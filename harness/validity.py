"""Whether a run is valid evidence: the server stayed up, prompts were built, every phase
served requests and showed the counter movements its suite expects."""

from __future__ import annotations

from harness.phase import PhaseResult


def judge(
    phases: list[PhaseResult], error: str | None, exit_code: int | None
) -> tuple[bool, list[str]]:
    """Return (valid, reasons); each reason is one line a person can act on."""
    reasons = []
    if exit_code is not None:
        where = f" during phase {phases[-1].name!r}" if phases else ""
        reasons.append(f"server exited with code {exit_code}{where}")
    if error:
        reasons.append(error)
    if not phases and not reasons:
        reasons.append("no phase ran")
    for phase in phases:
        failed = [r for r in phase.records if not r.ok]
        if phase.records and len(failed) == len(phase.records):
            reasons.append(
                f"phase {phase.name!r}: all {len(failed)} requests failed "
                f"(first: {failed[0].error or 'HTTP ' + str(failed[0].status)})"
            )
        for outcome in phase.expect:
            if outcome.status != "fail":
                continue
            rule = outcome.rule
            got = outcome.note or f"delta was {outcome.delta:g}"
            reasons.append(
                f"phase {phase.name!r}: expected {rule.series} {rule.op} {rule.value:g}, {got}"
            )
    return not reasons, reasons
