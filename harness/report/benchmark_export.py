"""An A/B result or a run JSON in pytest-benchmark's saved-run shape (what `pytest-benchmark
compare` and `list` read from `.benchmarks/<machine-id>/NNNN_<name>.json`), so a server's
latencies sit beside a team's micro-benchmarks: one benchmark per arm and time metric, named
`TEST[ARM-METRIC]`, its data the per-round values in seconds (pytest-benchmark's unit), one
round per cold server. Throughput and memory are not times and stay in the harness's report."""

from __future__ import annotations

import math
import platform
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from harness.results.ab_result import ABResult
from harness.results.checked import is_ab
from harness.results.comparison import MetricResult
from harness.results.metrics import CATALOGUE
from harness.results.run import Machine, Run, RunFile

SECONDS = {"ms": 1e-3, "s": 1.0}  # a time metric's stored unit -> seconds
TIME_METRICS = tuple(m.name for m in CATALOGUE if m.unit in SECONDS)
UNIT = {m.name: SECONDS[m.unit] for m in CATALOGUE if m.unit in SECONDS}
SHAPE_VERSION = "5.3.1"  # the pytest-benchmark release whose file shape this writes


def machine_id() -> str:
    """The folder pytest-benchmark files this interpreter's runs under: Linux-CPython-3.11-64bit."""
    return "-".join(
        (
            platform.system(),
            platform.python_implementation(),
            ".".join(platform.python_version_tuple()[:2]),
            platform.architecture()[0],
        )
    )


def stats(data: list[float]) -> dict:
    """pytest-benchmark's `stats` of these values, each field as its Stats class defines it."""
    xs = sorted(data)
    n = len(xs)
    mean = statistics.mean(xs)
    stddev = statistics.stdev(xs) if n > 1 else 0
    q1, q3 = _quartiles(xs)
    iqr = q3 - q1
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    sd_out = sum(1 for x in xs if x < mean - stddev or x > mean + stddev)
    iqr_out = sum(1 for x in xs if x < low or x > high)
    total = sum(xs)
    return {
        "min": xs[0],
        "max": xs[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": statistics.median(xs),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_out,
        "stddev_outliers": sd_out,
        "outliers": f"{sd_out};{iqr_out}",
        "ld15iqr": xs[0] if n == 1 else xs[bisect_left(xs, low)],
        "hd15iqr": xs[0] if n == 1 else xs[bisect_right(xs, high) - 1],
        "ops": n / total if total else 0,
        "total": total,
        "data": list(data),
        "iterations": 1,
    }


def _quartiles(xs: list[float]) -> tuple[float, float]:
    """Q1 and Q3 of sorted values as pytest-benchmark computes them (Tukey's hinges for an even
    count, interpolated for an odd one)."""
    n = len(xs)
    if n == 1:
        return xs[0], xs[0]
    if n % 2 == 0:
        return statistics.median(xs[: n // 2]), statistics.median(xs[n // 2 :])
    k, r = n // 4, n % 4
    if r == 1:
        return 0.25 * xs[k - 1] + 0.75 * xs[k], 0.75 * xs[3 * k] + 0.25 * xs[3 * k + 1]
    return 0.75 * xs[k] + 0.25 * xs[k + 1], 0.25 * xs[3 * k + 1] + 0.75 * xs[3 * k + 2]


@dataclass(frozen=True)
class Source:
    """What the export reads of a saved result: an A/B result's record, or a run JSON's runs
    and its arm's label."""

    ab: ABResult | None
    runs: list[Run]
    label: str | None = None

    @classmethod
    def of(cls, doc: Mapping) -> Source:
        if is_ab(doc):
            ab = ABResult.from_json(doc)
            return cls(ab, [run for r in ab.rounds for run in (r.base, r.head) if run])
        file = RunFile.from_json(doc)
        runs = [Run.from_json(r, f"runs[{i}]") for i, r in enumerate(file.runs)]
        return cls(None, runs, file.arm.label if file.arm else None)


def arm_series(src: Source) -> dict[str, dict[str, list[float]]]:
    """arm -> time metric -> its values in seconds, one per round (an A/B result: the values the
    gate judged; a run JSON: one per valid run, as arm `run`). Unmeasured values are left out."""
    if src.ab is not None:
        c = src.ab.comparison
        entries = [*c.metrics, *c.ungated]
        return {
            "base": {m.name: _seconds(m.name, m.base) for m in entries if m.name in UNIT},
            "head": {m.name: _seconds(m.name, m.head) for m in entries if m.name in UNIT},
        }
    valid = [r for r in src.runs if r.valid]
    return {"run": {m: _seconds(m, [r.summary.get(m) for r in valid]) for m in TIME_METRICS}}


def _seconds(metric: str, values: list) -> list[float]:
    return [
        v * UNIT[metric]
        for v in values
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]


def _judged(src: Source) -> dict[str, MetricResult]:
    """metric -> what the gate said of it (empty for a run JSON)."""
    if src.ab is None:
        return {}
    c = src.ab.comparison
    return {m.name: m for m in c.ungated} | {m.name: m for m in c.metrics}


def benchmarks(src: Source, test: str, nodeid: str, report: str | None = None) -> list[dict]:
    """The benchmarks of one result for the test `test` (its node id `nodeid`): one per arm and
    time metric with at least one value, grouped per metric so `compare` tables the arms."""
    judged = _judged(src)
    ab = src.ab
    labels = {"base": ab.base.label, "head": ab.head.label} if ab else {"run": src.label}
    out = []
    for arm, series in arm_series(src).items():
        for metric, data in series.items():
            if not data:
                continue
            param = f"{arm}-{metric}"
            said = judged.get(metric)
            extra = {
                "servegate_metric": metric,
                "servegate_arm": arm,
                "label": labels.get(arm),
                "suite": ab.suite if ab else None,
                "unit": "s",
                "verdict": str(said.verdict) if said else None,
                "ratio": said.ratio if said else None,
                "ci": [said.ci_low, said.ci_high] if said else None,
                "tolerance": said.tolerance if said else None,
                "report": report,
            }
            out.append(
                {
                    "group": f"{_bare(test)}: {metric}",
                    "name": _with_param(test, param),
                    "fullname": _with_param(nodeid, param),
                    "params": {"arm": arm, "metric": metric},
                    "param": param,
                    "extra_info": {k: v for k, v in extra.items() if v is not None},
                    "options": {
                        "disable_gc": False,
                        "timer": "servegate: one cold server per round",
                        "min_rounds": len(data),
                        "max_time": None,
                        "min_time": None,
                        "warmup": False,
                    },
                    "stats": stats(data),
                }
            )
    return out


def _bare(name: str) -> str:
    return name.split("[", 1)[0]


def _with_param(name: str, param: str) -> str:
    """`test_x[head-ttft_p50_ms]`; a test with parameters of its own keeps them first."""
    if name.endswith("]") and "[" in name:
        return f"{name[:-1]}-{param}]"
    return f"{name}[{param}]"


def machine_info(src: Source) -> dict:
    """pytest-benchmark's machine_info: this interpreter's platform facts, and the CPU the
    harness recorded for the measured runs."""
    machine = next((r.machine for r in src.runs if r.machine), None) or Machine()
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": platform.system(),
        "cpu": {
            "brand_raw": machine.cpu_model,
            "arch_string_raw": platform.machine(),
            "count": machine.logical_cores,
            "flags": machine.cpu_flags if machine.cpu_flags is not None else [],
        },
    }


def saved_run(
    doc: Mapping, test: str, nodeid: str, commit_info: dict, report: str | None = None
) -> dict:
    """One pytest-benchmark saved run holding the benchmarks of one result (store.load's
    document)."""
    src = Source.of(doc)
    when = src.ab.created if src.ab else (src.runs[0].started_at if src.runs else None)
    return {
        "machine_info": machine_info(src),
        "commit_info": commit_info,
        "benchmarks": benchmarks(src, test, nodeid, report),
        "datetime": when,
        "version": SHAPE_VERSION,
    }
