"""The offline gate: two saved files compared (`harness compare A.json B.json`: A's runs are
base, B's runs are head), paired by index, as an A/B result a report can show."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from harness.results import store
from harness.results.ab_result import ABResult, Arm, Round
from harness.results.errors import ComparisonError
from harness.results.run import Run
from harness.results.saved import check_values, runs_in, with_raw
from harness.stats.compare import compare_rounds

DEFAULT_TOLERANCES = {
    "ttft_p50_ms": 0.10,
    "ttft_p95_ms": 0.10,
    "tok_s": 0.10,
    "peak_rss_bytes": 0.05,
    "peak_device_bytes": 0.05,
}
OFFLINE_CAVEAT = (
    "offline compare: the two sets of runs did not interleave in one job, so round i of A is "
    "paired with run i of B; the CI holds only if both ran on the same machine under like load"
)


def tolerances_of(doc: dict | list) -> dict[str, float]:
    """The per-metric tolerances an A/B result was gated with (empty for bare runs)."""
    metrics = ((doc.get("comparison") or {}) if isinstance(doc, dict) else {}).get("metrics")
    if not isinstance(metrics, list):
        return {}
    tolerances = {m.get("name"): m.get("tolerance") for m in metrics if isinstance(m, dict)}
    if not all(isinstance(k, str) and isinstance(v, int | float) for k, v in tolerances.items()):
        raise ComparisonError("comparison.metrics: each needs a name and a numeric tolerance")
    return cast(dict[str, float], tolerances)  # each checked just above


def _get(doc: object, key: str) -> object:
    return doc.get(key) if isinstance(doc, dict) else None


def _arm(doc: dict | list, arm: str, path: Path, runs: list[Run]) -> Arm:
    """The arm as the saved A/B named it; a bare run file's arm is named after its file."""
    if isinstance(doc, dict) and isinstance(doc.get(arm), dict) and "label" in doc[arm]:
        return Arm.from_json(doc[arm], f"{path}: {arm}")
    commit = runs[0].server.commit if runs and runs[0].server else None
    return Arm(label=path.stem, ref=None, commit=commit, flags=[], env={}, cmd="")


def compare_saved(
    a_path: Path,
    b_path: Path,
    tolerances: dict[str, float] | None = None,
    slack_bytes: float = 0,
    *,
    arm_a: str = "head",
    arm_b: str = "head",
    created: str | None = None,
) -> ABResult:
    """An A/B result (ready for write_report) from two saved files: A's runs as base, B's as
    head, paired by index. Tolerances default to A's own, else DEFAULT_TOLERANCES."""
    a_path, b_path = Path(a_path), Path(b_path)
    doc_a = with_raw(store.read_json(a_path), a_path)
    doc_b = with_raw(store.read_json(b_path), b_path)
    store.version(doc_a, a_path), store.version(doc_b, b_path)
    base, head = runs_in(doc_a, arm_a, a_path), runs_in(doc_b, arm_b, b_path)
    if not base or not head:
        raise ComparisonError(f"no runs in {a_path if not base else b_path}")
    tolerances = tolerances or tolerances_of(doc_a) or DEFAULT_TOLERANCES
    check_values(base, list(tolerances), a_path)
    check_values(head, list(tolerances), b_path)
    doc_a = store.checked(doc_a, a_path)  # then every other field the comparison and report read
    doc_b = store.checked(doc_b, b_path)
    n = min(len(base), len(head))
    base_runs = [Run.from_json(run, f"{a_path} run {i}") for i, run in enumerate(base)]
    head_runs = [Run.from_json(run, f"{b_path} run {i}") for i, run in enumerate(head)]
    rounds = [
        Round(round=i, order=["base", "head"], base=base_runs[i], head=head_runs[i])
        for i in range(n)
    ]
    comparison = compare_rounds(rounds, tolerances, slack_bytes)
    warnings = [*comparison.warnings, OFFLINE_CAVEAT]
    if len(base) != len(head):
        warnings.append(
            f"{len(base)} base runs vs {len(head)} head runs: only the first {n} of each compared"
        )
    return ABResult(
        suite=suite if isinstance(suite := _get(doc_a, "suite"), str) else "offline",
        base=_arm(doc_a, arm_a, a_path, base_runs),
        head=_arm(doc_b, arm_b, b_path, head_runs),
        rounds=rounds,
        comparison=replace(comparison, warnings=warnings),
        command=f"harness compare {a_path} {b_path}",
        created=created or datetime.now(UTC).isoformat(timespec="seconds"),
        crash=None,
    )
