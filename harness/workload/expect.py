"""Counter expectations of a suite phase (`"series{label=\"v\"}" = ">=1"`) and their evaluation
against the /metrics deltas of one phase."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, ">": operator.gt, "<": operator.lt}
_RULE = re.compile(r"^\s*(>=|<=|==|>|<)\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*$")
_SERIES = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


class ExpectError(ValueError):
    """An expect rule or series selector that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class ExpectRule:
    series: str
    name: str
    labels: tuple[tuple[str, str], ...]
    op: str
    value: float

    def holds(self, delta: float) -> bool:
        return OPS[self.op](delta, self.value)


@dataclass(slots=True)
class ExpectOutcome:
    rule: ExpectRule
    status: str  # "pass" | "fail" | "skipped"
    delta: float | None
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "series": self.rule.series,
            "rule": f"{self.rule.op}{self.rule.value:g}",
            "status": self.status,
            "delta": self.delta,
            "note": self.note,
        }


def parse_series(series: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Split `name{a="x",b="y"}` into the name and its sorted label pairs."""
    m = _SERIES.match(series)
    if not m:
        raise ExpectError(f"not a Prometheus series selector: {series!r}")
    body = (m.group(2) or "").strip()
    labels: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        lm = _LABEL.match(body, pos)
        if not lm:
            raise ExpectError(f'bad label list in {series!r} (want name="value", ...)')
        labels.append((lm.group(1), lm.group(2)))
        pos = lm.end()
    return m.group(1), tuple(sorted(labels))


def parse_rule(series: str, rule: object) -> ExpectRule:
    """Parse one `expect` entry; a bare number means `>=` that number."""
    if isinstance(rule, bool):
        raise ExpectError(f'expect {series!r}: want a rule like ">=1", got {rule!r}')
    text = f">={rule}" if isinstance(rule, int | float) else str(rule)
    m = _RULE.match(text)
    if not m:
        raise ExpectError(
            f"expect {series!r}: bad rule {rule!r} (want one of >=, <=, ==, >, < then a number)"
        )
    name, labels = parse_series(series)
    return ExpectRule(series, name, labels, m.group(1), float(m.group(2)))


def series_key(name: str, labels: dict[str, str]) -> str:
    """The canonical key of a sample: `name{a="x",b="y"}` with sorted labels, or `name`."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def matching_delta(rule: ExpectRule, deltas: dict[str, float]) -> float:
    """Sum the deltas of every sample whose name matches and whose labels include the rule's."""
    total = 0.0
    for key, delta in deltas.items():
        name, labels = parse_series(key)
        if name == rule.name and set(rule.labels) <= set(labels):
            total += delta
    return total


@dataclass(slots=True)
class ExpectContext:
    """What the evaluation needs besides the rules: deltas, exported names, and strictness."""

    deltas: dict[str, float]
    exported: set[str] = field(default_factory=set)
    strict: bool = True  # the reference engine must export every series it is asked about
    metrics_available: bool = True


def evaluate(rules: list[ExpectRule], ctx: ExpectContext) -> list[ExpectOutcome]:
    """Judge each rule. A name the server never exported fails a strict arm and is skipped
    (with a note) for an external one; a labelled series absent from an exported family is 0."""
    outcomes = []
    for rule in rules:
        if not ctx.metrics_available:
            status = "fail" if ctx.strict else "skipped"
            outcomes.append(ExpectOutcome(rule, status, None, "server has no /metrics"))
        elif rule.name not in ctx.exported:
            status = "fail" if ctx.strict else "skipped"
            outcomes.append(ExpectOutcome(rule, status, None, "series not exported by server"))
        else:
            delta = matching_delta(rule, ctx.deltas)
            outcomes.append(ExpectOutcome(rule, "pass" if rule.holds(delta) else "fail", delta))
    return outcomes
