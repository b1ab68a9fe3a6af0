"""What a test gets back from a run of the harness: the saved result (read through
harness.results.store) as small frozen records, so `assert result.verdict != "REGRESSION"` is
a test and a failed assertion prints one line about the gate, not the whole document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from harness.results.metrics import METRICS


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
    """The record of a saved A/B result (store.load's document)."""
    c = doc["comparison"]
    entries = [(e, True) for e in c["metrics"]] + [(e, False) for e in c.get("ungated", [])]
    metrics = {e["name"]: _change(e, gated) for e, gated in entries}
    return GateResult(
        verdict=c["verdict"],
        exit_code=c["exit_code"],
        rounds=c.get("rounds", len(doc.get("rounds", []))),
        metrics=MappingProxyType(metrics),
        gated=tuple(e["name"] for e in c["metrics"]),
        invalid=tuple(c.get("invalid", [])),
        warnings=tuple(c.get("warnings", [])),
        base_label=doc["base"]["label"],
        head_label=doc["head"]["label"],
        report=report,
        json=json_path,
    )


def _change(e: Mapping, gated: bool) -> MetricChange:
    ci = (e["ci_low"], e["ci_high"]) if e.get("ci_low") is not None else None
    return MetricChange(
        name=e["name"],
        verdict=e["verdict"],
        gated=gated,
        base=tuple(e["base"]),
        head=tuple(e["head"]),
        base_value=e.get("base_value"),
        head_value=e.get("head_value"),
        ratio=e.get("ratio"),
        ci=ci,
        tolerance=e.get("tolerance") if gated else None,
    )


def run_result(doc: Mapping, json_path: Path, exit_code: int) -> RunResult:
    """The record of a saved run JSON (`{"arm": ..., "runs": [...]}`)."""
    runs = doc["runs"]
    invalid = tuple(
        f"run {i}: {why}" for i, r in enumerate(runs, 1) for why in r["invalid_reasons"]
    )
    valid = exit_code == 0 and all(r["valid"] for r in runs)
    return RunResult(
        verdict="VALID" if valid else "INVALID",
        exit_code=exit_code,
        metrics=MappingProxyType(
            {name: tuple(r["summary"].get(name) for r in runs) for name in METRICS}
        ),
        invalid=invalid,
        label=doc["arm"]["label"],
        json=json_path,
    )
