"""Saved results: read the JSON of an A/B result or of single runs, and compare two saved
files offline (`harness compare A.json B.json`: A's runs are base, B's runs are head)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from harness.compare import ComparisonError, compare_rounds

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


def runs_of(doc: dict | list, arm: str = "head") -> list[dict]:
    """The runs in a saved document: one arm of an A/B result, a list of runs, or one run."""
    if isinstance(doc, list):
        return doc
    if "rounds" in doc:
        return [r[arm] for r in doc["rounds"] if r.get(arm) is not None]
    if "runs" in doc:
        return doc["runs"]
    if "summary" in doc:
        return [doc]
    raise ComparisonError("not a saved result: expected rounds, runs, or a run's summary")


def tolerances_of(doc: dict | list) -> dict[str, float]:
    """The per-metric tolerances an A/B result was gated with (empty for bare runs)."""
    if isinstance(doc, dict) and "comparison" in doc:
        return {m["name"]: m["tolerance"] for m in doc["comparison"]["metrics"]}
    return {}


def _arm(doc: dict | list, arm: str, path: Path, runs: list[dict]) -> dict:
    if isinstance(doc, dict) and arm in doc and "label" in doc[arm]:
        return doc[arm]
    commit = (runs[0].get("server") or {}).get("commit") if runs else None
    return {"label": path.stem, "ref": None, "commit": commit, "flags": [], "env": {}, "cmd": ""}


def compare_saved(
    a_path: Path,
    b_path: Path,
    tolerances: dict[str, float] | None = None,
    slack_bytes: float = 0,
    *,
    arm_a: str = "head",
    arm_b: str = "head",
    created: str | None = None,
) -> dict:
    """An A/B result (ready for write_report) from two saved files: A's runs as base, B's as
    head, paired by index. Tolerances default to A's own, else DEFAULT_TOLERANCES."""
    a_path, b_path = Path(a_path), Path(b_path)
    doc_a, doc_b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    base, head = runs_of(doc_a, arm_a), runs_of(doc_b, arm_b)
    if not base or not head:
        raise ComparisonError(f"no runs in {a_path if not base else b_path}")
    tolerances = tolerances or tolerances_of(doc_a) or DEFAULT_TOLERANCES
    n = min(len(base), len(head))
    rounds = [
        {"round": i, "order": ["base", "head"], "base": base[i], "head": head[i], "null": None}
        for i in range(n)
    ]
    comparison = compare_rounds(rounds, tolerances, slack_bytes)
    comparison.warnings.append(OFFLINE_CAVEAT)
    if len(base) != len(head):
        comparison.warnings.append(
            f"{len(base)} base runs vs {len(head)} head runs: only the first {n} of each compared"
        )
    return {
        "suite": doc_a.get("suite", "offline") if isinstance(doc_a, dict) else "offline",
        "base": _arm(doc_a, arm_a, a_path, base),
        "head": _arm(doc_b, arm_b, b_path, head),
        "rounds": rounds,
        "comparison": comparison.to_dict(),
        "command": f"harness compare {a_path} {b_path}",
        "created": created or date.today().isoformat(),
        "crash": None,
    }
