"""Saved results, read one way: bounded and confined (a regular file within MAX_INPUT_BYTES,
gzip or not), its `schema` checked, every field a verb reads checked (checked.py), then
migrated from an older schema to the one this harness writes. `save` writes them."""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

from harness.files import read_capped, strict_json, write_atomic
from harness.results.checked import check_saved
from harness.results.errors import ComparisonError
from harness.results.metrics import METRICS, Method, log_spread

MAX_INPUT_BYTES = 64 * 2**20  # a saved A/B result is 0.4-3 MB, a run JSON with timelines ~10,
# a raw file tens: parsing JSON takes ~25x its size in memory, so this bounds it near 1.6 GB
SCHEMAS = {"ab": 2, "sweep": 2, "bisect": 2, "run": 1}  # what this harness writes
SCHEMA = re.compile(r"servegate\.([a-z]+)/([0-9]{1,4})")
# what version 1 stored as warnings and version 2 writes from the numbers when it shows them
DERIVED = re.compile(
    r"\S+ INCONCLUSIVE after \d+ round|\S+ not judged: |null arm \(base vs base\) shows "
)


def schema(kind: str) -> str:
    """The schema string this harness writes for `kind`: `servegate.ab/2`."""
    return f"servegate.{kind}/{SCHEMAS[kind]}"


def read_json(path: Path, *, within: Path | None = None) -> Any:
    """A saved JSON document, or a gzip-compressed one (`.gz`), within MAX_INPUT_BYTES (counted
    as read, compressed and not): a regular file only, and with `within` none outside it."""
    path = Path(path)
    limit = MAX_INPUT_BYTES
    cap = f"over the {limit // 2**20} MiB a saved result may have"
    try:
        data = read_capped(path, limit, "saved result", ComparisonError, within=within)
    except ComparisonError as exc:
        head, over, _ = str(exc).rpartition(": over ")  # the door's size line, made plainer
        raise ComparisonError(f"{head}: {cap}" if over else str(exc)) from None
    try:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
                data = f.read(limit + 1)
            if len(data) > limit:
                raise ComparisonError(f"{path}: {cap} (uncompressed)")
        return json.loads(data.decode("utf-8"))
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise ComparisonError(f"{path}: not gzip: {exc}") from None
    except UnicodeDecodeError:
        raise ComparisonError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise ComparisonError(f"{path}: nested too deep to be a saved result") from None
    except ValueError as exc:
        raise ComparisonError(f"{path}: not JSON: {exc}") from None


def version(doc: object, path: Path) -> tuple[str, int] | None:
    """(kind, version) of a document that names its schema; None for one that names none (a
    list of runs, or a result older than schemas); one line for any other schema."""
    named = doc.get("schema") if isinstance(doc, dict) else None
    if named is None:
        return None
    match = SCHEMA.fullmatch(named) if isinstance(named, str) else None
    if match is None or match[1] not in SCHEMAS or int(match[2]) < 1:
        known = ", ".join(schema(k) for k in SCHEMAS)
        raise ComparisonError(f"{path}: schema {named!r} is not one this harness reads ({known})")
    kind, n = match[1], int(match[2])
    if n > SCHEMAS[kind]:
        raise ComparisonError(
            f"{path}: schema {named} is newer than this harness reads ({schema(kind)}): "
            "upgrade servegate to read it"
        )
    return kind, n


def migrate(doc: Any, path: Path) -> Any:
    """The document in the shape this harness writes. Version 2 of an A/B, sweep or bisect
    result stores in each metric's comparison the value standing for each arm (the catalogue's
    centre of its rounds, what the terminal and the reports show) and the noise per round, and
    no sentence the report writes from those numbers; it also compares the metrics the suite
    does not gate, which a version 1 result cannot have (its report shows none as moved)."""
    found = version(doc, path)
    if found is None or found[1] == SCHEMAS[found[0]]:
        return doc
    _centres(doc)
    doc["schema"] = schema(found[0])
    return doc


def _centres(node: object) -> None:
    """Version 1 -> 2 of every metric comparison and comparison under `node`."""
    if isinstance(node, list):
        for item in node:
            _centres(item)
    elif isinstance(node, dict):
        if _is_metric_result(node):
            entry = METRICS[node["name"]]
            for arm in ("base", "head"):
                values = node[arm]
                exact = node["method"] == Method.SIMULATED and len(values) == 1
                node.setdefault(f"{arm}_value", values[0] if exact else entry.centre(values))
            if node["method"] in (Method.T, Method.BOOTSTRAP):
                node.setdefault("spread", log_spread(node["base"], node["head"]))
            return
        if isinstance(node.get("metrics"), list) and isinstance(node.get("warnings"), list):
            node["warnings"] = [w for w in node["warnings"] if not DERIVED.match(str(w))]
        for value in node.values():
            _centres(value)


def _is_metric_result(node: dict) -> bool:
    return (
        node.get("name") in METRICS
        and "method" in node
        and "ratio" in node
        and all(isinstance(node.get(a), list) for a in ("base", "head"))
    )


def load(path: Path, *, within: Path | None = None) -> Any:
    """A saved result, read, checked and migrated (checked.py names a bad field in one line)."""
    return checked(read_json(path, within=within), path)


def checked(doc: object, path: Path) -> Any:
    """A document read from `path`, its schema and fields checked, then migrated."""
    version(doc, path)
    check_saved(doc, path)
    return migrate(doc, path)


def save(doc: dict, path: Path, **dump) -> None:
    """Write a result as strict JSON (no NaN or infinity), atomically."""
    write_atomic(Path(path), strict_json(doc, **dump) + "\n")
