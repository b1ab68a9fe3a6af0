"""Saved results checked field by field before any verb reads them (`report`, `compare`,
`merge`, `export`, `history`, `publish`): a damaged, hand-edited or hostile file is one line
naming the file and the field (exit 2, or one skipped file in a history), never a traceback.
The checks are the records' own (record.py reads each field by its type); keys no record names
are not read by any verb and are left alone."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from harness.results.ab_result import ABResult
from harness.results.bisect_result import BisectResult
from harness.results.errors import ComparisonError
from harness.results.record import Record
from harness.results.run import Run, RunFile
from harness.results.sweep_result import SweepResult

R = TypeVar("R", bound=Record)
SHARDS: dict[str, type[ABResult] | type[SweepResult] | type[BisectResult]] = {
    "ab": ABResult,
    "sweep": SweepResult,
    "bisect": BisectResult,
}


def _checked(path: Path, reads: list[tuple[type[Record], object, str]]) -> None:
    for record, doc, where in reads:
        read_record(record, doc, path, where)


def read_record(record: type[R], doc: object, path: Path, where: str = "the result") -> R:
    """`doc` as `record`, or one ComparisonError line naming the file and the field."""
    try:
        return record.from_json(doc, where)
    except ComparisonError as exc:
        raise ComparisonError(f"{path}: {str(exc).removeprefix('the result.')}") from None


def _run(item: object) -> bool:
    return isinstance(item, dict) and "summary" in item


def is_ab(doc: object) -> bool:
    return isinstance(doc, dict) and "comparison" in doc and "rounds" in doc


def check_saved(doc: object, path: Path) -> None:
    """Any saved result a verb reads: an A/B result, a `harness run` JSON (its arm and runs), a
    list of runs or one run; other documents (a sweep, a bisect) as `check_shard` says."""
    path = Path(path)
    if is_ab(doc):
        _checked(path, [(ABResult, doc, "the result")])
    elif isinstance(doc, dict) and "runs" in doc and "summary" not in doc:
        if str(doc.get("schema", "")).startswith("servegate.sweep"):
            _checked(path, [(SweepResult, doc, "the result")])
            return
        _checked(path, [(RunFile, doc, "the result")])
        _checked(path, [(Run, r, f"runs[{i}]") for i, r in enumerate(doc["runs"]) if _run(r)])
    elif isinstance(doc, list):  # what is not a run at all is runs_of's to name
        _checked(path, [(Run, r, f"[{i}]") for i, r in enumerate(doc) if _run(r)])
    elif isinstance(doc, dict) and "summary" in doc:
        _checked(path, [(Run, doc, "the run")])


def check_shard(doc: dict, path: Path, kind: str) -> None:
    """A `harness merge` shard: an A/B, a sweep or a bisect result, each field merge reads."""
    if kind == "ab":
        check_saved(doc, path)
    else:
        _checked(
            Path(path), [(SweepResult if kind == "sweep" else BisectResult, doc, "the result")]
        )


def check_exportable(runs: list[dict], path: Path) -> None:
    """`harness export` rebuilds each request from its phase, index and lengths; an answered
    one must have ended."""
    for i, run in enumerate(runs):
        try:
            Run.from_json(run, f"runs[{i}]").exportable(f"runs[{i}]")
        except ComparisonError as exc:
            raise ComparisonError(f"{path}: {exc}") from None
