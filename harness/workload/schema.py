"""The suite file's schema: every table's keys and the TOML type each value must have, checked
before anything is built from it, so a mistyped suite is one clear line, never a traceback."""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.files import read_capped

NUMBER = (int, float)
TABLE = dict
ARRAY = list
MAX_TOML_BYTES = 4 * 2**20  # a suite or a servegate.toml is a few KB

SUITE = {
    "name": str, "description": str, "model": str, "flags": (str, ARRAY, TABLE), "warmup": TABLE,
    "phase": ARRAY, "gate": TABLE, "slo": TABLE, "client_procs": (int, str), "capacity": TABLE,
}  # fmt: skip
PHASE = {
    "name": str, "arrival": str, "clients": int, "requests": int, "rate": NUMBER, "seed": int,
    "prompt_tokens": (int, TABLE), "prefix_tokens": int, "max_tokens": int, "ignore_eos": bool,
    "temperature": NUMBER, "endpoint": str, "expect": TABLE, "max_error_rate": NUMBER,
    "bursts": int, "request_timeout_s": NUMBER, "phase_timeout_s": NUMBER, "burstiness": NUMBER,
    "ramp": str, "ramp_to": NUMBER, "stages": ARRAY, "trace": str, "time_scale": NUMBER,
    "max_lateness_ms": NUMBER, "dataset": str, "turns": int, "think_time_s": NUMBER,
    "followup_tokens": int, "cancel_share": NUMBER, "cancel_after_tokens": int,
    "cancel_after_ms": NUMBER, "settle_s": NUMBER,
}  # fmt: skip
STAGE = {"rate": NUMBER, "duration_s": NUMBER}
CAPACITY = {"mode": str, "start": NUMBER, "max": NUMBER, "precision": NUMBER,
            "attainment": NUMBER, "steps": int, "budget_s": NUMBER}  # fmt: skip
SLO = {"ttft_ms": NUMBER, "tpot_ms": NUMBER, "e2e_ms": NUMBER}  # a request's limits (goodput)
DIST = {"dist": str, "min": int, "max": int, "mean": NUMBER, "std": NUMBER, "choices": ARRAY}
TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
              dict: "a table", list: "an array"}  # fmt: skip


class SchemaError(ValueError):
    """A key the table does not know, or a value of the wrong type; the message is one line."""


def read_toml(path: Path) -> dict:
    """A TOML file's tables; SchemaError (one line, naming the file) when it cannot be read."""
    try:
        text = read_capped(path, MAX_TOML_BYTES, "TOML file", SchemaError).decode("utf-8")
        return tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise SchemaError(
            f"{path}: not UTF-8 text (byte {exc.start}): TOML must be UTF-8"
        ) from None
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SchemaError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise SchemaError(f"{path}: not valid TOML: nested too deep") from None


def _is(value: object, kinds: type | tuple[type, ...]) -> bool:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, bool):  # TOML true/false is never a number
        return bool in kinds
    return isinstance(value, kinds)


def _want(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if int in kinds and float in kinds:  # a TOML number: integer or float
        kinds = tuple(k for k in kinds if k is not int)
    return " or ".join(TYPE_NAMES[k] for k in kinds)


def _got(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_table(table: object, schema: dict, where: str) -> dict:
    """`table` itself, once it is a table whose keys are all known and typed as `schema` says."""
    if not isinstance(table, dict):
        raise SchemaError(f"{where} must be a table, got {_got(table)}")
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key, kinds in schema.items():
        if key in table and not _is(table[key], kinds):
            raise SchemaError(f"{where}: {key} must be {_want(kinds)}, got {_got(table[key])}")
    return table


def check_values(table: object, kinds: type | tuple[type, ...], where: str) -> dict:
    """A table whose every value has the same type (gate tolerances, expect rules)."""
    if not isinstance(table, dict):
        raise SchemaError(f"{where} must be a table, got {_got(table)}")
    for key, value in table.items():
        if not _is(value, kinds):
            raise SchemaError(f"{where}.{key} must be {_want(kinds)}, got {_got(value)}")
    return table


def check_items(items: list, kinds: type | tuple[type, ...], where: str) -> list:
    for value in items:
        if not _is(value, kinds):
            raise SchemaError(f"{where}: every entry must be {_want(kinds)}, got {_got(value)}")
    return items
