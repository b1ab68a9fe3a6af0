"""A saved result's records read from and written to JSON in one way, derived from their type
hints: `from_json` checks every field as it builds the record (a damaged, hand-edited or hostile
file is one line naming the field: `rounds[0].head.valid is 'yes', not true or false`), and
`to_json` writes it back. A record's field without a default must be there; a field may be
null only where its type admits None (a missing field with a default of None reads as null); a
key no record names is left out. A record whose `FLAT` names one of its dict fields keeps that
field's items at its own level in JSON (a curve's point: its name, level and every metric);
`to_json` leaves out a null field that may be missing, as the writers always did.

The kinds of value beyond Python's types are `Annotated` aliases: Count (a whole number >= 0),
Pos (a finite number >= 0), Rounds, Code (an exit code), Date (ISO 8601), Words (a string or a
list of them), Table (any object), MetricName (a metric of the catalogue)."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Annotated, Any, TypeVar, Union

from harness.results.errors import ComparisonError
from harness.results.metrics import METRICS

BIG = 2**63  # past it a number is no count, and float() of it loses or overflows
MAX_ROUNDS = 10**6


def _number(v: object) -> bool:
    if isinstance(v, float):
        return True
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**1000  # float() holds it


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _iso(v: object) -> bool:
    try:
        datetime.fromisoformat(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


@dataclasses.dataclass(frozen=True)
class Kind:
    """A rule a value must meet, and how the error line says what was wanted."""

    ok: typing.Callable[[object], bool]
    want: str


KINDS = {
    str: Kind(lambda v: isinstance(v, str), "a string"),
    bool: Kind(lambda v: isinstance(v, bool), "true or false"),
    float: Kind(lambda v: _number(v) and math.isfinite(v), "a finite number"),  # type: ignore[arg-type]
    int: Kind(_whole, "a whole number"),
}
Pos = Annotated[float, Kind(lambda v: _number(v) and math.isfinite(v) and v >= 0,
                            "a finite number >= 0")]  # fmt: skip
Count = Annotated[int, Kind(lambda v: _whole(v) and 0 <= v < BIG, "a whole number >= 0")]
Rounds = Annotated[int, Kind(lambda v: _whole(v) and 0 <= v <= MAX_ROUNDS,
                             f"a whole number of rounds (0 to {MAX_ROUNDS:,})")]  # fmt: skip
Code = Annotated[int, Kind(lambda v: _whole(v) and v in (0, 1, 2), "an exit code (0, 1 or 2)")]
Date = Annotated[str, Kind(_iso, "an ISO 8601 date")]
Words = Annotated[Any, Kind(lambda v: isinstance(v, str) or isinstance(v, list) and all(
    isinstance(w, str) for w in v), "a string or a list of strings")]  # fmt: skip
Table = Annotated[dict, Kind(lambda v: isinstance(v, dict), "an object")]
MetricName = Annotated[str, Kind(lambda v: v in METRICS, "a metric of the catalogue")]

R = TypeVar("R")


def show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def bad(where: str, value: object, want: str) -> ComparisonError:
    return ComparisonError(f"{where} is {show(value)}, not {want}")


@cache
def _fields(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type, required) of each field of the record `cls`."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f.name, hints[f.name], _required(f)) for f in dataclasses.fields(cls) if f.init)


@cache
def _null_defaults(cls: type) -> frozenset[str]:
    """The fields whose default is None: left out of JSON while null (read back as null)."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.init and f.default is None)


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def read(tp: Any, value: object, where: str) -> Any:
    """`value` as the type `tp`, or ComparisonError naming `where` (a dotted field)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, kind = typing.get_args(tp)[:2]
        if not kind.ok(value):
            raise bad(where, value, kind.want)
        return value
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        (only,) = options  # a union is "this or null"; Words is a kind
        return read(only, value, where)
    if tp is Any:
        return value
    if origin is list:
        if not isinstance(value, list):
            raise bad(where, value, "a list")
        (item,) = typing.get_args(tp)
        return [read(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise bad(where, value, "an object")
        item = typing.get_args(tp)[1]
        return {k: read(item, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return from_json(tp, value, where)  # type: ignore[arg-type]
    if isinstance(tp, type) and issubclass(tp, Enum):
        members = [m.value for m in tp]
        if value not in members:
            raise bad(where, value, f"one of {', '.join(map(str, members))}")
        return tp(value)
    kind = KINDS[tp]
    if not kind.ok(value):
        raise bad(where, value, kind.want)
    return value


def from_json(cls: type[R], data: object, where: str = "the result") -> R:
    """The record `cls` read from a JSON object, every field checked as it is read."""
    if not isinstance(data, dict):
        raise bad(where, data, "an object")
    if flat := getattr(cls, "FLAT", None):
        named = {name for name, _, _ in _fields(cls)}  # type: ignore[arg-type]
        data = {k: v for k, v in data.items() if k in named} | {
            flat: {k: v for k, v in data.items() if k not in named}
        }
    values = {}
    for name, tp, required in _fields(cls):  # type: ignore[arg-type]
        if name not in data:
            if required:
                raise ComparisonError(f"{where}.{name} is missing")
            continue
        at = where if name == flat else f"{where}.{name}"  # a flat field's items are the record's
        values[name] = read(tp, data[name], at)
    record = cls(**values)
    check = getattr(record, "check", None)
    if check is not None:
        check(where)
    return record


def to_json(value: Any) -> Any:
    """A record (or a value holding records) as JSON: every field by name."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields, omitted = _fields(type(value)), _null_defaults(type(value))
        out = {
            name: to_json(getattr(value, name))
            for name, _, _ in fields
            if name not in omitted or getattr(value, name) is not None
        }
        if flat := getattr(value, "FLAT", None):
            out |= out.pop(flat)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


class Record:
    """The JSON boundary of a frozen dataclass record: `Cls.from_json(doc)` and `x.to_json()`."""

    @classmethod
    def from_json(cls: type[R], data: object, where: str = "the result") -> R:
        return from_json(cls, data, where)

    def to_json(self) -> dict:
        return to_json(self)
