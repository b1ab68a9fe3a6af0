"""The metric catalogue: every metric a run's summary holds, once, with which way is better, the
rule that judges it, its unit and label, and where its value comes from. The gate, the terminal,
the reports, sweep, history and saved-result checks all read it; a new metric is one entry here
(plus its measurement, when it is not a percentile of a per-request column)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from statistics import median, stdev


class Method(StrEnum):
    """How a comparison was judged: an interval on the head/base ratio (Student t, or a
    bootstrap for few or skewed rounds), the min/max rule of memory peaks, or an exact
    simulation."""

    T = "t"
    BOOTSTRAP = "bootstrap"
    MINMAX = "minmax"
    SIMULATED = "simulated"


UNITS = {  # unit -> (shown as, divisor from the stored value)
    "ms": ("ms", 1),
    "s": ("s", 1),
    "bytes": ("MiB", 2**20),
    "tok/s": ("tok/s", 1),
    "req/s": ("req/s", 1),
    "count": ("", 1),
}


@dataclass(frozen=True, slots=True)
class Metric:
    name: str  # the run summary's key (docs/run-json.md)
    label: str
    unit: str  # a key of UNITS
    lower_is_better: bool = True
    gateable: bool = True  # a suite's [gate] may name it
    memory_peak: bool = False  # judged by the min/max rule, not an interval
    column: str = ""  # a percentile of this per-request column (load/metrics.py) ...
    quantile: float = 0.0  # ... at this quantile
    digits: int = 1
    source: str = ""

    @property
    def method(self) -> Method:
        """The rule the gate applies (an interval metric becomes BOOTSTRAP where its data asks)."""
        return Method.MINMAX if self.memory_peak else Method.T

    @property
    def heading(self) -> str:
        """`TTFT p50 (ms)`: a column or row heading whose cells are `number()`."""
        shown = UNITS[self.unit][0]
        return f"{self.label} ({shown})" if shown else self.label

    def number(self, value: float | None) -> str:
        """The value in its display unit, without the unit; `-` when not measured."""
        if value is None:
            return "-"
        if self.unit == "count":
            return f"{value:g}"
        return f"{value / UNITS[self.unit][1]:.{self.digits}f}"

    def show(self, value: float | None) -> str:
        """The value with its unit, `12.3 ms`, `630.5 MiB`; `n/a` when not measured."""
        if value is None:
            return "n/a"
        shown = UNITS[self.unit][0]
        return f"{self.number(value)} {shown}".rstrip()

    def centre(self, values: list[float | None]) -> float | None:
        """The one value that stands for an arm's rounds: the geometric mean of an interval
        metric (so head/base of the two is exactly the gate's ratio, exp(mean ln(head/base))),
        the median of a memory peak (whose ratio is head/base of the medians)."""
        xs = [v for v in values if v is not None]
        if not xs:
            return None
        if self.memory_peak or min(xs) <= 0:
            return median(xs)
        return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _pct(name: str, label: str, column: str, q: float, digits: int = 1, **kw) -> Metric:
    return Metric(name, label, "ms", column=column, quantile=q, digits=digits, **kw)


CATALOGUE: tuple[Metric, ...] = (
    _pct("ttft_p50_ms", "TTFT p50", "ttft_ms", 0.50, source="time to first token, ok requests"),
    _pct("ttft_p90_ms", "TTFT p90", "ttft_ms", 0.90, source="time to first token, ok requests"),
    _pct("ttft_p95_ms", "TTFT p95", "ttft_ms", 0.95, source="time to first token, ok requests"),
    _pct("ttft_p99_ms", "TTFT p99", "ttft_ms", 0.99, source="time to first token, ok requests"),
    _pct("tpot_ms", "TPOT p50", "tpot_ms", 0.50, 2, source="time per output token, ok requests"),
    _pct("itl_p50_ms", "ITL p50", "itl_ms", 0.50, 2, source="every inter-token gap"),
    _pct("itl_p95_ms", "ITL p95", "itl_ms", 0.95, 2, source="every inter-token gap"),
    _pct("e2e_p50_ms", "E2E p50", "e2e_ms", 0.50, source="end-to-end latency, ok requests"),
    _pct("e2e_p95_ms", "E2E p95", "e2e_ms", 0.95, source="end-to-end latency, ok requests"),
    _pct("queue_p50_ms", "client queue p50", "queue_ms", 0.50, source="due -> sent, client"),
    _pct("queue_p95_ms", "client queue p95", "queue_ms", 0.95, source="due -> sent, client"),
    Metric("tok_s", "output throughput", "tok/s", False, source="output tokens / phase spans"),
    Metric("req_s", "requests", "req/s", False, digits=2, source="ok requests / spans"),
    Metric("goodput_req_s", "goodput", "req/s", False, digits=2, source="requests meeting [slo]"),
    Metric("capacity_req_s", "capacity", "req/s", False, digits=2,
           source="req/s at the highest load meeting [slo], offered or in closed loop served "
                  "([capacity] search)"),
    Metric("errors", "errors", "count", gateable=False, source="failed requests"),
    Metric("peak_rss_bytes", "peak RSS, exact", "bytes", memory_peak=True,
           source="server tree's VmHWM, max over phases"),
    Metric("peak_rss_sampled_bytes", "peak RSS, sampled", "bytes", gateable=False,
           memory_peak=True, source="RSS timeline's max inside the phases"),
    Metric("peak_device_bytes", "peak device", "bytes", memory_peak=True,
           source="server /metrics gauges, /v1/memory or NVML, max over phases"),
    Metric("startup_s", "startup", "s", digits=2, source="launch to ready"),
    Metric("startup_peak_rss_bytes", "startup peak RSS", "bytes", memory_peak=True,
           source="server tree's VmHWM when it became ready"),
    Metric("token_mismatches", "token count mismatches", "count", gateable=False,
           source="usage vs streamed chunks"),
    Metric("usage_missing", "responses without usage", "count", gateable=False,
           source="ok responses without usage"),
)  # fmt: skip
METRICS = {m.name: m for m in CATALOGUE}
GATEABLE = tuple(m.name for m in CATALOGUE if m.gateable)
SUMMARY_KEYS = tuple(m.name for m in CATALOGUE)


def log_spread(base: list, head: list) -> float | None:
    """The noise per round of a paired metric: sd of ln(head/base) over the rounds where both
    are positive numbers; None below two such rounds."""
    d = [
        math.log(h / b)
        for b, h in zip(base, head, strict=False)
        if isinstance(b, int | float) and isinstance(h, int | float) and b > 0 and h > 0
    ]
    return stdev(d) if len(d) >= 2 else None


def metric(name: str) -> Metric:
    """The catalogue's entry; ValueError for a name it does not hold (a gate never guesses
    which way is bad)."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"no known direction for metric {name!r}") from None
