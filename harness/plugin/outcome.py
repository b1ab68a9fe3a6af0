"""What a test gets back from a run of the harness: views of the saved result's records
(harness/results/: read through harness.results.store), small and frozen, so
`assert result.verdict != "REGRESSION"` is a test and a failed assertion prints one line about
the gate, not the whole document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from harness.results.ab_result import ABResult, Arm
from harness.results.comparison import MetricResult
from harness.results.metrics import METRICS
from harness.results.run import Run


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One metric of an A/B: each arm's per-round values and the value standing for them (in
    the catalogue's unit: ms, s, bytes, tok/s), the head/base ratio, its 95% CI and verdict."""

    name: str
    verdict: str  # PASS, IMPROVEMENT, INCONCLUSIVE, REGRESSION; n/a when not gated
    gated: bool
    base: tuple[float | None, ...]
    head: tuple[float | None, ...]
    base_value: float | None
    head_value: float | None
    ratio: float | None
    ci: tuple[float, float] | None
    tolerance: float | None

    @property
    def change(self) -> float | None:
        """head/base - 1: +0.30 is 30% more (slower, for a latency)."""
        return None if self.ratio is None else self.ratio - 1

    @property
    def unit(self) -> str:
        return METRICS[self.name].unit

    def __str__(self) -> str:
        if self.ratio is None:
            return f"{self.name} {self.verdict}"
        ci = f" CI [{self.ci[0]:.3f}, {self.ci[1]:.3f}]" if self.ci else ""
        return f"{self.name} {self.verdict} {self.ratio:.3f}x{ci}"


@dataclass(frozen=True, slots=True)
class GateResult:
    """A `harness ab`: the verdict and exit code (0 pass, 1 regression, 2 invalid), every
    compared metric by name, the report and its JSON, and the pytest-benchmark file written."""

    verdict: str
    exit_code: int
    rounds: int
    metrics: Mapping[str, MetricChange]
    gated: tuple[str, ...]
    invalid: tuple[str, ...]  # one line per reason the run was INVALID
    warnings: tuple[str, ...]
    base_label: str
    head_label: str
    report: Path  # the Markdown report
    json: Path  # the saved result it was read from
    benchmark_json: Path | None = None

    @property
    def changes(self) -> dict[str, float | None]:
        """metric -> head/base - 1."""
        return {name: m.change for name, m in self.metrics.items()}

    @property
    def values(self) -> dict[str, tuple[float | None, float | None]]:
        """metric -> (base value, head value), in the catalogue's unit."""
        return {name: (m.base_value, m.head_value) for name, m in self.metrics.items()}

    @property
    def regressions(self) -> tuple[str, ...]:
        return tuple(n for n, m in self.metrics.items() if m.verdict == "REGRESSION")

    def __getitem__(self, name: str) -> MetricChange:
        return self.metrics[name]

    def __repr__(self) -> str:
        gated = "; ".join(str(self.metrics[n]) for n in self.gated if n in self.metrics)
        why = f": {self.invalid[0]}" if self.invalid else ""
        return f"<{self.verdict} exit {self.exit_code}{why}; {gated}; report {self.report}>"


@dataclass(frozen=True, slots=True)
class RunResult:
    """A `harness run`: each metric's value per run (in the catalogue's unit), whether every
    run was valid (VALID, else INVALID with its reasons), and the run JSON."""

    verdict: str  # VALID or INVALID
    exit_code: int
    metrics: Mapping[str, tuple[float | None, ...]]
    invalid: tuple[str, ...]
    label: str
    json: Path
    benchmark_json: Path | None = None

    def value(self, name: str) -> float | None:
        """The catalogue's centre of the metric's runs (geometric mean; median for memory)."""
        return METRICS[name].centre(list(self.metrics[name]))

    def __getitem__(self, name: str) -> tuple[float | None, ...]:
        return self.metrics[name]

    def __repr__(self) -> str:
        why = f": {self.invalid[0]}" if self.invalid else ""
        return (
            f"<{self.verdict} exit {self.exit_code}{why}; {len(self.invalid)} invalid; {self.json}>"
        )


def gate_result(doc: Mapping, json_path: Path, report: Path) -> GateResult:
    """The view of a saved A/B result (store.load's document, read into its record)."""
    result = ABResult.from_json(doc)
    c = result.comparison
    entries = [(m, True) for m in c.metrics] + [(m, False) for m in c.ungated]
    return GateResult(
        verdict=c.verdict,
        exit_code=c.exit_code,
        rounds=c.rounds,
        metrics=MappingProxyType({m.name: _change(m, gated) for m, gated in entries}),
        gated=tuple(m.name for m in c.metrics),
        invalid=tuple(c.invalid),
        warnings=tuple(c.warnings),
        base_label=result.base.label,
        head_label=result.head.label,
        report=report,
        json=json_path,
    )


def _change(m: MetricResult, gated: bool) -> MetricChange:
    ci = (m.ci_low, m.ci_high) if m.ci_low is not None and m.ci_high is not None else None
    return MetricChange(
        name=m.name,
        verdict=str(m.verdict),
        gated=gated,
        base=tuple(m.base),
        head=tuple(m.head),
        base_value=m.base_value,
        head_value=m.head_value,
        ratio=m.ratio,
        ci=ci,
        tolerance=m.tolerance if gated else None,
    )


def run_result(doc: Mapping, json_path: Path, exit_code: int) -> RunResult:
    """The view of a saved run JSON (`{"arm": ..., "runs": [...]}`), each run its record."""
    runs = [Run.from_json(r, f"runs[{i}]") for i, r in enumerate(doc["runs"])]
    invalid = tuple(f"run {i}: {why}" for i, r in enumerate(runs, 1) for why in r.invalid_reasons)
    valid = exit_code == 0 and all(r.valid for r in runs)
    return RunResult(
        verdict="VALID" if valid else "INVALID",
        exit_code=exit_code,
        metrics=MappingProxyType(
            {name: tuple(r.summary.get(name) for r in runs) for name in METRICS}
        ),
        invalid=invalid,
        label=Arm.from_json(doc["arm"]).label,
        json=json_path,
    )
