"""A suite file's [[phase]] table read into a Phase: its flat keys (the TOML a person writes)
sorted into the phase's parts, a key its arrival mode cannot follow refused in one line, and a
staged table read as one rate phase per stage."""

from __future__ import annotations

from dataclasses import MISSING, fields
from pathlib import Path

from harness.workload import schema
from harness.workload.arrival import (
    MODES,
    Arrival,
    Burst,
    Concurrency,
    Rate,
    Replay,
    SuiteError,
    finite,
    whole,
)
from harness.workload.dataset import DatasetError, read_dataset
from harness.workload.expect import ExpectError, parse_rule
from harness.workload.phase import Cancels, Conversation, Phase, PromptLength
from harness.workload.trace import TraceError, read_trace


def _keys(part: type, prefix: str = "") -> dict[str, object]:
    """A part's keys in a phase table: its fields (under `prefix`), each with the value that
    means "not given" (its default; None for a field without one)."""
    return {prefix + f.name: None if f.default is MISSING else f.default for f in fields(part)}


BURST_KEYS, RATE_KEYS, REPLAY_KEYS = _keys(Burst), _keys(Rate), _keys(Replay)
CONVERSATION_KEYS, CANCEL_KEYS = _keys(Conversation), _keys(Cancels, "cancel_")
PART_KEYS = {**BURST_KEYS, **RATE_KEYS, **REPLAY_KEYS, **CONVERSATION_KEYS, **CANCEL_KEYS}


def parse_phases(raw: object, default_name: str, here: Path = Path(".")) -> list[Phase]:
    """One [[phase]] table as its phase, or a staged one (`stages = [{rate, duration_s}, ...]`,
    as inference-perf's staged load) as one rate phase per stage, NAME-1, NAME-2, ..., each
    with rate x duration_s requests and its own metrics."""
    if not isinstance(raw, dict) or "stages" not in raw:
        return [parse_phase(raw, default_name, here)]
    name = raw.get("name", default_name)
    where = f"phase {name!r}: stages"
    if clash := sorted({"arrival", "rate", "requests", "bursts"} & set(raw)):
        raise SuiteError(f"{where}: give each stage's rate and duration_s, not {', '.join(clash)}")
    stages = schema.check_items(raw["stages"], dict, where)
    if not stages:
        raise SuiteError(f"{where} must list at least one {{rate, duration_s}}")
    out = []
    for i, stage in enumerate(stages, start=1):
        schema.check_table(stage, schema.STAGE, f"{where}[{i}]")
        rate, duration = stage.get("rate"), stage.get("duration_s")
        if not (finite(rate) and rate > 0 and finite(duration) and duration > 0):
            raise SuiteError(f"{where}[{i}]: needs a rate > 0 and a duration_s > 0")
        requests = max(1, round(rate * duration))
        table = {k: v for k, v in raw.items() if k != "stages"}
        table |= {"name": f"{name}-{i}", "arrival": "rate", "rate": rate, "requests": requests}
        out.append(parse_phase(table, default_name, here))
    return out


def parse_phase(raw: object, default_name: str, here: Path = Path(".")) -> Phase:
    if not isinstance(raw, dict):
        raise SuiteError(f"{default_name} must be a table")
    where = f"phase {raw.get('name', default_name)!r}"
    args = dict(schema.check_table(raw, schema.PHASE, where))
    args.setdefault("name", default_name)
    where = f"phase {args['name']!r}"
    if not whole(args.get("clients", 1), 1):  # 0 in the record means "not given"
        raise SuiteError(f"{where}: clients must be a positive integer, got {args['clients']!r}")
    try:
        args["arrival"] = _arrival(args, here)
        if "dataset" in args:
            args["dataset"] = read_dataset(here / args["dataset"])
        if talk := _given(args, CONVERSATION_KEYS):
            args["conversation"] = Conversation(**({"turns": 1} | talk))
        if cancels := _given(args, CANCEL_KEYS):
            given = {k.removeprefix("cancel_"): v for k, v in cancels.items()}
            args["cancels"] = Cancels(**({"share": 0.0} | given))
        args["prompt_tokens"] = _length(args.get("prompt_tokens", 64))
        expect = schema.check_values(args.get("expect", {}), (str, *schema.NUMBER), "expect")
        args["expect"] = tuple(parse_rule(k, v) for k, v in expect.items())
    except (SuiteError, schema.SchemaError, TraceError, DatasetError, ExpectError) as exc:
        raise SuiteError(f"{where}: {exc}") from None
    try:
        return Phase(**args)
    except TypeError as exc:
        raise SuiteError(f"{where}: {exc}") from None


def _given(args: dict, keys: dict[str, object]) -> dict:
    """A part's keys taken out of `args`, those at their "not given" value left out."""
    taken = {k: args.pop(k) for k in keys if k in args}
    return {k: v for k, v in taken.items() if v != keys[k]}


def _arrival(args: dict, here: Path) -> Arrival:
    """The arrival record of a phase table, its keys taken out of `args`: a key of another
    arrival is refused."""
    mode = args.pop("arrival", "concurrency")
    if mode not in MODES:
        raise SuiteError(f"arrival must be one of {', '.join(MODES)}")
    burst, rate = _given(args, BURST_KEYS), _given(args, RATE_KEYS)
    replay = _given(args, REPLAY_KEYS)
    if burst and mode != "burst":
        raise SuiteError('bursts is only meaningful with arrival = "burst"')
    if "rate" in rate and mode != "rate":
        raise SuiteError('rate is only meaningful with arrival = "rate"')
    if rate and mode != "rate":
        raise SuiteError('burstiness and ramp need arrival = "rate"')
    if (mode == "trace") != ("trace" in replay):
        raise SuiteError('arrival = "trace" and a trace file go together')
    if replay and mode != "trace":
        raise SuiteError('time_scale is only meaningful with arrival = "trace"')
    if mode == "burst":
        return Burst(**burst)
    if mode == "rate":
        return Rate(**({"rate": None} | rate))  # no rate: Rate says what it needs
    if mode == "concurrency":
        return Concurrency()
    trace = read_trace(here / replay.pop("trace"))  # a path relative to the suite file
    args.setdefault("requests", len(trace.requests))
    args.setdefault("max_tokens", max(r.output_length for r in trace.requests))
    return Replay(trace, **replay)


def _length(raw: object) -> PromptLength:
    where = "prompt_tokens"
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
        return PromptLength(value=raw)
    if not isinstance(raw, dict):
        raise SuiteError(f"{where} must be a positive integer or a table with dist = ...")
    schema.check_table(raw, schema.DIST, where)
    schema.check_items(raw.get("choices", []), int, f"{where}: choices")
    dist = raw.get("dist")
    try:
        if dist == "uniform":
            length = PromptLength("uniform", min=int(raw["min"]), max=int(raw["max"]))
        elif dist == "normal":
            if not (finite(raw["mean"]) and finite(raw["std"]) and raw["std"] >= 0):
                raise SuiteError(f"{where}: mean and std must be finite numbers, std >= 0")
            length = PromptLength(
                "normal", mean=float(raw["mean"]), std=float(raw["std"]),
                min=int(raw.get("min", 1)), max=int(raw["max"]),
            )  # fmt: skip
        elif dist == "choice":
            length = PromptLength("choice", choices=tuple(int(c) for c in raw["choices"]))
        else:
            raise SuiteError(f"{where}: dist must be uniform, normal or choice")
    except KeyError as exc:
        raise SuiteError(f"{where}: dist = {dist!r} needs {exc.args[0]}") from None
    if length.dist != "choice" and not 1 <= length.min <= length.max:
        raise SuiteError(f"{where}: need 1 <= min <= max")
    if length.dist == "choice" and (not length.choices or min(length.choices) < 1):
        raise SuiteError(f"{where}: choices must be a non-empty list of positive integers")
    return length
