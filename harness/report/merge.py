"""`harness merge`: the results of a CI matrix (one A/B, sweep or bisect per shard) as one
table of suite x machine x metric -> verdict, and the worst shard's exit code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.escape import markdown
from harness.report.summary import MARK
from harness.report.tables import fmt_change, fmt_interval
from harness.results import store
from harness.results.ab_result import ABResult
from harness.results.bisect_result import BisectResult
from harness.results.checked import SHARDS, check_shard, read_record
from harness.results.comparison import Comparison
from harness.results.errors import ComparisonError
from harness.results.run import Run
from harness.results.sweep_result import SweepResult
from harness.results.verdicts import EXIT_CODES, EXIT_MEANING, INCONCLUSIVE_EXIT

RANK = ("INVALID", "REGRESSION", "INCONCLUSIVE", "IMPROVEMENT", "PASS", "VALID", "NAMED")


@dataclass(frozen=True, slots=True)
class Row:
    suite: str
    machine: str
    metric: str
    change: str
    interval: str
    verdict: str
    source: str


@dataclass(frozen=True, slots=True)
class Shard:
    path: Path
    kind: str
    verdict: str
    exit_code: int
    rows: tuple[Row, ...]


def machine_name(result: ABResult | SweepResult | BisectResult) -> str:
    """The machine a result ran on, as a reader names it: CPU model and core count."""
    runs: list[Run | None] = []
    if isinstance(result, ABResult):
        runs = [run for r in result.rounds for run in (r.base, r.head)]
    elif isinstance(result, SweepResult):
        runs = [r.run for r in result.runs]
    for run in runs:
        if run is not None and (m := run.machine) is not None:
            return f"{m.cpu_model or '?'} x{'?' if m.logical_cores is None else m.logical_cores}"
    return "unknown machine"


def _metric_rows(comp: Comparison, suite: str, machine: str, source: str, where: str = "") -> list:
    return [
        Row(
            suite,
            machine,
            f"{where}{m.name}",
            fmt_change(m.ratio),
            fmt_interval(m, True),
            str(m.verdict),
            source,
        )  # fmt: skip
        for m in comp.metrics
    ]


# the exit codes a result with each verdict carries: a sweep's and a bisect's own words too,
# and an INCONCLUSIVE whichever its team chose (--inconclusive)
SHARD_CODES = {v: {c} for v, c in EXIT_CODES.items()} | {
    "INCONCLUSIVE": set(INCONCLUSIVE_EXIT.values()),
    "VALID": {0},
    "NAMED": {0},
}


def read_shard(path: Path) -> Shard:
    """One result file as a shard; ComparisonError for a file that is none of the three, or
    whose verdict is not a word servegate writes with the exit code it maps to (the verdict is
    shown in a pull request and becomes a step output)."""
    shard = _read_shard(path)
    if shard.exit_code not in SHARD_CODES.get(shard.verdict, ()):
        raise ComparisonError(
            f"{path}: verdict {shard.verdict[:40]!r} with exit code {shard.exit_code} is not a "
            f"result servegate writes (one of {', '.join(SHARD_CODES)}, with its code)"
        )
    return shard


def _read_shard(path: Path) -> Shard:
    doc = store.read_json(path)
    store.version(doc, path)
    schema = str(doc.get("schema", "")) if isinstance(doc, dict) else ""
    kind = None if not isinstance(doc, dict) else (
        "ab" if "comparison" in doc else "sweep" if schema.startswith("servegate.sweep")
        else "bisect" if schema.startswith("servegate.bisect") else None)  # fmt: skip
    if kind is None:
        raise ComparisonError(f"{path}: not an A/B, sweep or bisect result (schema {schema!r})")
    check_shard(doc, path, kind)  # each field merge reads, named when it is wrong
    result = read_record(SHARDS[kind], store.migrate(doc, path), path)
    suite, machine, name = result.suite, machine_name(result), Path(path).name
    if isinstance(result, ABResult):  # an A/B (harness ab or compare)
        comp = result.comparison
        rows = _metric_rows(comp, suite, machine, name)
        return Shard(Path(path), "ab", comp.verdict, comp.exit_code, tuple(rows))
    if isinstance(result, SweepResult):
        j = result.judgement
        rows = [
            row
            for level, comp in (j.levels or {}).items()
            for row in _metric_rows(comp, suite, machine, name, f"{level}: ")
        ]
        return Shard(Path(path), "sweep", j.verdict, j.exit_code, tuple(rows))
    culprit = result.culprit
    said = f"{culprit.short} {culprit.subject}" if culprit else "none named"
    verdict, code = ("NAMED", 0) if culprit else ("INVALID", 2)
    row = Row(suite, machine, "first bad commit", said, "", verdict, name)
    return Shard(Path(path), "bisect", verdict, code, (row,))


def worst(shards: list[Shard]) -> tuple[str, int]:
    """The merged verdict and exit code: the highest exit code, and among those the verdict a
    reader must see first (an INCONCLUSIVE shard is not hidden behind a PASS)."""
    code = max(s.exit_code for s in shards)
    verdicts = [s.verdict for s in shards if s.exit_code == code]
    return min(verdicts, key=lambda v: RANK.index(v) if v in RANK else 0), code


def merged_markdown(shards: list[Shard]) -> str:
    verdict, code = worst(shards)
    head = f"### {MARK.get(verdict, '')} servegate merge: {verdict} (exit {code}): "
    lines = [head + f"{len(shards)} result(s); {EXIT_MEANING[code]}", ""]
    lines += ["| Suite | Machine | Metric | Change | 95% CI | Verdict | From |", "|---" * 7 + "|"]
    for s in shards:
        lines += [
            "| " + " | ".join(markdown(getattr(r, f)) for f in Row.__slots__) + " |" for r in s.rows
        ] or [
            f"| ? | ? | (nothing compared) | | | {markdown(s.verdict)} | {markdown(s.path.name)} |"
        ]
    return "\n".join(lines) + "\n"
