"""Saved results read back: the JSON of an A/B result (its shape checked, its raw file beside
it when there), or the runs of a run file, a list of runs or one run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness.results import store
from harness.results.errors import ComparisonError
from harness.results.metrics import METRICS

RESULT_SHAPE = {"suite": str, "created": str, "base": dict, "head": dict, "rounds": list,
                "comparison": dict}  # fmt: skip
COMPARISON_SHAPE = {"verdict": str, "exit_code": int, "rounds": int, "metrics": list,
                    "invalid": list, "warnings": list}  # fmt: skip


def with_raw(doc: object, path: Path) -> Any:
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


def runs_in(doc: object, arm: str, path: Path) -> list[dict]:
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
