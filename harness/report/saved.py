"""Saved results: read the JSON of an A/B result or of single runs, and compare two saved
files offline (`harness compare A.json B.json`: A's runs are base, B's runs are head)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from harness.results import store
from harness.results.errors import ComparisonError
from harness.results.metrics import METRICS
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


RESULT_SHAPE = {"suite": str, "created": str, "base": dict, "head": dict, "rounds": list,
                "comparison": dict}  # fmt: skip
COMPARISON_SHAPE = {"verdict": str, "exit_code": int, "rounds": int, "metrics": list,
                    "invalid": list, "warnings": list}  # fmt: skip


def with_raw(doc: object, path: Path) -> object:
    """A slim result's raw file (its per-request records and timelines) when it lies beside
    it; else the slim result as it is."""
    raw = doc.get("raw") if isinstance(doc, dict) else None
    folder = Path(path).parent
    if (
        isinstance(raw, str)
        and "/" not in raw
        and raw not in ("", ".", "..")
        and (folder / raw).exists()
    ):
        return store.read_json(folder / raw, within=folder)
    return doc


def runs_of(doc: object, arm: str = "head") -> list[dict]:
    """The runs in a saved document: one arm of an A/B result, a list of runs, or one run."""
    if isinstance(doc, list):
        runs = doc
    elif not isinstance(doc, dict):
        runs = None
    elif isinstance(doc.get("rounds"), list):
        rounds = [r for r in doc["rounds"] if isinstance(r, dict)]
        runs = [r[arm] for r in rounds if r.get(arm) is not None]
    elif "runs" in doc:
        runs = doc["runs"]
    elif "summary" in doc:
        runs = [doc]
    else:
        runs = None
    if not isinstance(runs, list) or not all(is_run(r) for r in runs):
        raise ComparisonError(
            "not a saved result: expected an A/B result's rounds, a run JSON's runs, or runs "
            "with a summary and a fingerprint"
        )
    return runs


def _runs_in(doc: object, arm: str, path: Path) -> list[dict]:
    try:
        return runs_of(doc, arm)
    except ComparisonError as exc:
        raise ComparisonError(f"{path}: {exc}") from None


def check_values(runs: list[dict], metrics: list[str], path: Path) -> None:
    """Every gated value of a valid run is a finite, positive number (a memory peak may be
    missing: not measured there); anything else is a damaged or hand-edited file."""
    for i, run in enumerate(runs):
        if not run.get("valid", True):
            continue  # an invalid run makes the comparison INVALID on its own
        for name in metrics:
            value = run["summary"].get(name)
            if value is None and METRICS[name].memory_peak:
                continue  # not measured on that machine
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value <= 0:
                raise ComparisonError(
                    f"{path}: run {i + 1}'s {name} is {value!r}, not a finite positive number"
                )


def is_run(run: object) -> bool:
    """A run record: what a result holds per arm per round (a summary and a fingerprint)."""
    return isinstance(run, dict) and isinstance(run.get("summary"), dict) and "fingerprint" in run


def load_result(path: Path) -> dict:
    """A saved A/B result (`harness ab` or `harness compare` wrote it), its shape checked: the
    raw file beside a slim JSON when it is there (plots need it), else the slim JSON."""
    doc = with_raw(store.read_json(path), path)
    store.version(doc, path)  # a schema it cannot read is said before any field
    where = f"{path}: not an A/B result"
    if not isinstance(doc, dict):
        raise ComparisonError(f"{where} (a JSON object with rounds and a comparison)")
    for shape, table, name in (
        (RESULT_SHAPE, doc, ""),
        (COMPARISON_SHAPE, doc.get("comparison"), "comparison."),
    ):
        for key, kind in shape.items():
            if not isinstance((table or {}).get(key), kind):
                raise ComparisonError(f"{where}: {name}{key} missing or not {kind.__name__}")
    for arm in ("base", "head"):
        if not isinstance(doc[arm].get("label"), str):
            raise ComparisonError(f"{where}: {arm}.label missing")
    runs_of(doc, "base"), runs_of(doc, "head")
    if not all(isinstance(m, dict) for m in doc["comparison"]["metrics"]):
        raise ComparisonError(f"{where}: comparison.metrics must be objects")
    return store.checked(doc, path)  # then every field the report reads


def tolerances_of(doc: dict | list) -> dict[str, float]:
    """The per-metric tolerances an A/B result was gated with (empty for bare runs)."""
    metrics = ((doc.get("comparison") or {}) if isinstance(doc, dict) else {}).get("metrics")
    if not isinstance(metrics, list):
        return {}
    tolerances = {m.get("name"): m.get("tolerance") for m in metrics if isinstance(m, dict)}
    if not all(isinstance(k, str) and isinstance(v, int | float) for k, v in tolerances.items()):
        raise ComparisonError("comparison.metrics: each needs a name and a numeric tolerance")
    return tolerances


def _get(doc: object, key: str) -> object:
    return doc.get(key) if isinstance(doc, dict) else None


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
    doc_a = with_raw(store.read_json(a_path), a_path)
    doc_b = with_raw(store.read_json(b_path), b_path)
    store.version(doc_a, a_path), store.version(doc_b, b_path)
    base, head = _runs_in(doc_a, arm_a, a_path), _runs_in(doc_b, arm_b, b_path)
    if not base or not head:
        raise ComparisonError(f"no runs in {a_path if not base else b_path}")
    tolerances = tolerances or tolerances_of(doc_a) or DEFAULT_TOLERANCES
    check_values(base, list(tolerances), a_path)
    check_values(head, list(tolerances), b_path)
    doc_a = store.checked(doc_a, a_path)  # then every other field the comparison and report read
    doc_b = store.checked(doc_b, b_path)
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
        "suite": suite if isinstance(suite := _get(doc_a, "suite"), str) else "offline",
        "base": _arm(doc_a, arm_a, a_path, base),
        "head": _arm(doc_b, arm_b, b_path, head),
        "rounds": rounds,
        "comparison": comparison.to_dict(),
        "command": f"harness compare {a_path} {b_path}",
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "crash": None,
    }
