"""Saved results checked field by field before any verb reads them (`report`, `compare`,
`merge`, `export`, `history`, `publish`): a damaged, hand-edited or hostile file is one line
naming the file and the field (exit 2, or one skipped file in a history), never a traceback.

A spec is a type name ("str", "bool", "num": finite, "count": an integer >= 0, "code": an exit
code, "date": ISO 8601), a dict of a table's fields ("!name": required), `List(spec)`,
`Map(spec)` (string keys) or `Opt(spec)` (null allowed). Keys a spec does not name are not
read by any verb and are left alone."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.results.errors import ComparisonError
from harness.results.metrics import METRICS, Method

BIG = 2**63  # past it a number is no count, and float() of it loses or overflows
MAX_ROUNDS = 10**6


@dataclass(frozen=True)
class List:
    of: object


@dataclass(frozen=True)
class Map:
    of: object


@dataclass(frozen=True)
class Opt:
    of: object


def _number(v: object) -> bool:
    if isinstance(v, float):
        return True
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**1000  # float() holds it


def _iso(v: object) -> bool:
    try:
        datetime.fromisoformat(v)
    except (TypeError, ValueError):
        return False
    return True


KINDS = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "num": (lambda v: _number(v) and math.isfinite(v), "a finite number"),
    "pos": (lambda v: _number(v) and math.isfinite(v) and v >= 0, "a finite number >= 0"),
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < BIG,
              "a whole number >= 0"),
    "rounds": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_ROUNDS,
               f"a whole number of rounds (0 to {MAX_ROUNDS:,})"),
    "code": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v in (0, 1, 2),
             "an exit code (0, 1 or 2)"),
    "date": (_iso, "an ISO 8601 date"),
    "table": (lambda v: isinstance(v, dict), "an object"),
    "words": (lambda v: isinstance(v, str) or isinstance(v, list) and all(
        isinstance(w, str) for w in v), "a string or a list of strings"),
    "any": (lambda v: True, "anything"),
    "metric": (lambda v: v in METRICS, "a metric of the catalogue"),
    "method": (lambda v: v in tuple(Method), f"one of {', '.join(Method)}"),
}  # fmt: skip


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _want(spec: object) -> str:
    if isinstance(spec, str):
        return KINDS[spec][1]
    if isinstance(spec, Opt):
        return f"{_want(spec.of)} or null"
    if isinstance(spec, List):
        return "a list"
    return "an object"


def check(value: object, spec: object, where: str) -> None:
    """ComparisonError naming `where` (a dotted field) when `value` is not `spec`."""
    if isinstance(spec, Opt):
        if value is not None:
            check(value, spec.of, where)
        return
    if isinstance(spec, str):
        ok, want = KINDS[spec]
        if not ok(value):
            raise ComparisonError(f"{where} is {_show(value)}, not {want}")
        return
    if isinstance(spec, List):
        if not isinstance(value, list):
            raise ComparisonError(f"{where} is {_show(value)}, not a list")
        for i, item in enumerate(value):
            check(item, spec.of, f"{where}[{i}]")
        return
    if not isinstance(value, dict):
        raise ComparisonError(f"{where} is {_show(value)}, not {_want(spec)}")
    if isinstance(spec, Map):
        for key, item in value.items():
            check(item, spec.of, f"{where}.{key}")
        return
    for key, field_spec in spec.items():
        name = key.lstrip("!")
        if name not in value:
            if key.startswith("!"):
                raise ComparisonError(f"{where}.{name} is missing")
            continue
        check(value[name], field_spec, f"{where}.{name}")


REQUEST = {
    "phase": "str", "index": "count", "prompt_tokens": "count", "max_tokens": "count",
    "arrival": "num", "send": "num", "first_token": Opt("num"), "end": Opt("num"),
    "itl_ms": List("num"), "reads": List(List("num")), "output_tokens": Opt("count"),
    "client_tokens": "count",
    "usage_prompt_tokens": Opt("count"), "status": "count", "error": Opt("str"),
    "finish_reason": Opt("str"), "response_id": Opt("str"), "turn": "count",
    "cached_tokens": Opt("count"), "ttft_ms": Opt("num"), "e2e_ms": Opt("num"),
    "tpot_ms": Opt("num"), "queue_ms": Opt("num"), "ok": "bool",
}  # fmt: skip
MACHINE = {
    "cpu_model": "str", "cpu_flags": List("str"), "gpus": List("str"),
    "logical_cores": Opt("count"), "physical_cores": Opt("count"), "usable_cores": Opt("count"),
    "memory_bytes": Opt("pos"), "load_average": List("num"), "platform": "str", "python": "str",
}  # fmt: skip
SERVER = {
    "url": Opt("str"), "pid": Opt("count"), "startup_s": Opt("num"),
    "startup_peak_rss_bytes": Opt("pos"), "ready_path": Opt("str"), "commit": Opt("str"),
    "model": Opt("str"), "config": Opt("table"), "health": Opt("table"),
    "runtime": Opt(Map(Opt("str"))),
}  # fmt: skip
PHASE = {
    "name": "str", "arrival": "str", "clients": Opt("count"), "requests": Opt("count"),
    "rate": Opt("num"), "burstiness": Opt("num"), "endpoint": Opt("str"),
    "max_tokens": Opt("count"), "prompt_lengths": List("count"),
}  # fmt: skip
EXPECT = {"!series": "str", "rule": "str", "status": "str", "delta": Opt("num"),
          "note": Opt("str")}  # fmt: skip
# a summary's latencies, rates, counts and byte counts are >= 0 (a negative memory peak would
# pass the memory rule); the queue times are due-to-sent, which a timer's wake-up can put a
# hair below 0, so only finite; a key not named here is finite like any summary value
SUMMARY = {m.name: Opt("num" if m.column == "queue_ms" else "pos") for m in METRICS.values()}
RUN = {
    "!summary": Map(Opt("num")),
    "fingerprint": "str",  # what compare and report need of a run (is_run) they check apart
    "valid": "bool",
    "invalid_reasons": List("str"),
    "started_at": Opt("date"),
    "outcome": Opt("str"),
    "suite": Opt({"name": "str", "gate": Opt(Map(Opt("num")))}),
    "workload": Opt({"phases": List(PHASE)}),
    "phases": Opt(Map({"window": List("num"), "stats": Map(Opt("num")), "expect": List(EXPECT)})),
    "counters": Opt(Map(Map("num"))),
    "sampler": Opt(
        {
            "hz": Opt("num"),
            "achieved_hz": Opt("num"),
            "max_gap_s": Opt("num"),
            "samples": Opt("count"),
        }
    ),
    "arm": Opt("table"),
    "timeline": Opt({"!t": List("num"), "!rss": List(Opt("num")), "marks": List("any")}),
    "requests": List(REQUEST),
    "warmup_requests": List(REQUEST),
    "request_count": "count",
    "server": Opt(SERVER),
    "machine": Opt(MACHINE),
    "prompt_tokenizer": Opt("str"),
    "harness": Opt({"version": Opt("str"), "commit": Opt("str")}),
}
METRIC = {
    "!name": "metric", "base": List(Opt("num")), "head": List(Opt("num")), "!ratio": Opt("num"),
    "!ci_low": Opt("num"), "!ci_high": Opt("num"), "!tolerance": "pos", "!verdict": "str",
    "!mde": Opt("num"), "!method": "method", "lower_is_better": "bool", "!note": Opt("str"),
    "base_value": Opt("num"), "head_value": Opt("num"), "spread": Opt("num"),
    "rounds_to_pass": Opt("rounds"), "changed": "bool",
}  # fmt: skip
COMPARISON = {
    "!verdict": "str", "!exit_code": "code", "!rounds": "rounds", "!metrics": List(METRIC),
    "!invalid": List("str"), "!warnings": List("str"), "noise": List(METRIC),
    "ungated": List(METRIC),
    "schedule": Opt({"looks": List("rounds"), "alpha": "num"}), "fingerprint": Opt("str"),
    "block": Opt("rounds"),
}  # fmt: skip
ARM = {
    "!label": "str", "!ref": Opt("str"), "commit": Opt("str"), "!cmd": Opt("words"),
    "!flags": Opt("words"), "!env": Opt(Map("str")), "date": Opt("str"),
    "subject": Opt("str"), "depth": Opt("count"), "dirty": Opt("bool"),
}  # fmt: skip
RUN_ARM = {  # a `harness run` JSON's arm: what history reads of it
    "commit": Opt("str"), "date": Opt("str"), "subject": Opt("str"), "depth": Opt("count"),
    "dirty": Opt("bool"),
}  # fmt: skip
ROUND = {"!round": "count", "order": List("str"), "base": Opt(RUN), "head": Opt(RUN),
         "null": Opt(RUN)}  # fmt: skip
AB = {
    "!suite": "str", "!created": "str", "!base": ARM, "!head": ARM, "!rounds": List(ROUND),
    "!comparison": COMPARISON, "command": Opt("str"), "gate": Opt(Map(Opt("num"))),
    "memory_slack_bytes": Opt("pos"), "null_arm": Opt("bool"), "!crash": Opt("table"),
    "schedule": Opt("table"), "simulated": Opt("table"), "raw": Opt("str"),
}  # fmt: skip
SWEEP = {
    "!suite": "str",
    "!judgement": {"!verdict": "str", "!exit_code": "code",
                   "levels": Opt(Map({"metrics": List(METRIC)}))},
    "runs": List({"run": Opt({"machine": Opt(MACHINE)})}),
}  # fmt: skip
BISECT = {"!suite": "str", "culprit": Opt({"!short": "str", "!subject": "str"})}


def _marks(run: dict, where: str) -> None:
    for i, mark in enumerate(((run.get("timeline") or {}).get("marks")) or []):
        if not (isinstance(mark, list) and len(mark) == 2):
            raise ComparisonError(f"{where}.timeline.marks[{i}] is {_show(mark)}, not [t, phase]")
        check(mark[0], "num", f"{where}.timeline.marks[{i}][0]")


def _answered(run: dict, where: str) -> None:
    """A request that was answered (status 200, no error) has ended: export spans it."""
    for i, req in enumerate(run.get("requests") or []):
        if req.get("status") == 200 and not req.get("error") and req.get("end") is None:
            raise ComparisonError(f"{where}.requests[{i}].end is missing for an answered request")


def check_run(run: object, where: str) -> None:
    check(run, RUN, where)
    check(run["summary"], SUMMARY, f"{where}.summary")
    _marks(run, where)


def _checked(path: Path, spec: object, doc: object, runs: list[tuple[object, str]]) -> None:
    try:
        if spec is not None:
            check(doc, spec, "the result")
        for run, where in runs:
            check_run(run, where)
    except ComparisonError as exc:
        raise ComparisonError(f"{path}: {str(exc).removeprefix('the result.')}") from None


def _round_runs(doc: dict) -> list[tuple[object, str]]:
    return [
        (rnd[arm], f"rounds[{i}].{arm}")
        for i, rnd in enumerate(doc.get("rounds") or [])
        if isinstance(rnd, dict)
        for arm in ("base", "head", "null")
        if rnd.get(arm) is not None
    ]


def _run(item: object) -> bool:
    return isinstance(item, dict) and "summary" in item


def is_ab(doc: object) -> bool:
    return isinstance(doc, dict) and "comparison" in doc and "rounds" in doc


def check_saved(doc: object, path: Path) -> None:
    """Any saved result a verb reads: an A/B result, a `harness run` JSON (its arm and runs), a
    list of runs or one run; other documents (a sweep, a bisect) as `check_shard` says."""
    path = Path(path)
    if is_ab(doc):
        _checked(path, AB, doc, [])
        _checked(path, None, doc, _round_runs(doc))
    elif isinstance(doc, dict) and "runs" in doc and "summary" not in doc:
        if str(doc.get("schema", "")).startswith("servegate.sweep"):
            _checked(path, SWEEP, doc, [])
            return
        _checked(path, {"!runs": List("table"), "arm": Opt(RUN_ARM)}, doc, [])
        runs = [(r, f"runs[{i}]") for i, r in enumerate(doc["runs"]) if _run(r)]
        _checked(path, None, doc, runs)
    elif isinstance(doc, list):  # what is not a run at all is runs_of's to name
        _checked(path, None, doc, [(r, f"[{i}]") for i, r in enumerate(doc) if _run(r)])
    elif isinstance(doc, dict) and "summary" in doc:
        _checked(path, None, doc, [(doc, "the run")])


def check_shard(doc: dict, path: Path, kind: str) -> None:
    """A `harness merge` shard: an A/B, a sweep or a bisect result, each field merge reads."""
    if kind == "ab":
        check_saved(doc, path)
    else:
        _checked(Path(path), SWEEP if kind == "sweep" else BISECT, doc, [])


def check_exportable(runs: list[dict], path: Path) -> None:
    """`harness export` rebuilds each request: it needs the fields a run JSON always has."""
    for i, run in enumerate(runs):
        for j, req in enumerate(run.get("requests") or []):
            for name in ("phase", "index", "prompt_tokens", "max_tokens"):
                if name not in req:
                    raise ComparisonError(f"{path}: runs[{i}].requests[{j}].{name} is missing")
        try:
            _answered(run, f"runs[{i}]")
        except ComparisonError as exc:
            raise ComparisonError(f"{path}: {exc}") from None
