"""A phase of a suite: how its requests arrive (burst, a closed loop, a rate or ramp, a trace,
a dataset, conversations), their lengths, cancels and settling, each field checked where the
phase is made; and the phase tables of a suite file parsed into phases."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from harness.workload import schema
from harness.workload.dataset import Dataset, DatasetError, read_dataset
from harness.workload.expect import ExpectError, ExpectRule, parse_rule
from harness.workload.trace import Trace, TraceError, read_trace

ARRIVALS = ("burst", "concurrency", "rate", "trace")
OPEN_LOOP = ("rate", "trace")  # arrivals on a schedule, not when an answer ends
MAX_OPEN_SLOTS = 256  # an open loop's client slots when the suite gives none
RAMPS = ("", "linear", "exponential")
ENDPOINTS = ("completions", "chat")


class SuiteError(ValueError):
    """A suite that cannot be found or does not validate; the message is one line."""


@dataclass(frozen=True, slots=True)
class PromptLength:
    """A prompt length in tokens: exact, or drawn from a seeded distribution."""

    dist: str = "exact"  # exact | uniform | normal | choice
    value: int = 0
    min: int = 1
    max: int = 0
    mean: float = 0.0
    std: float = 0.0
    choices: tuple[int, ...] = ()

    def sample(self, rng: random.Random, n: int) -> list[int]:
        if self.dist == "exact":
            return [self.value] * n
        if self.dist == "uniform":
            return [rng.randint(self.min, self.max) for _ in range(n)]
        if self.dist == "choice":
            return [rng.choice(self.choices) for _ in range(n)]
        return [
            min(self.max, max(self.min, round(rng.gauss(self.mean, self.std)))) for _ in range(n)
        ]

    @property
    def floor(self) -> int:
        return {"exact": self.value, "choice": min(self.choices or (0,))}.get(self.dist, self.min)


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    arrival: str = "concurrency"
    clients: int | None = None  # requests out at once; unset: 1, or in an open loop every one
    requests: int = 1
    rate: float | None = None
    seed: int = 0
    prompt_tokens: PromptLength = field(default_factory=lambda: PromptLength(value=64))
    prefix_tokens: int = 0
    max_tokens: int = 16
    ignore_eos: bool = True
    temperature: float = 0.0
    endpoint: str = "completions"
    expect: tuple[ExpectRule, ...] = ()
    max_error_rate: float = 0.5  # more failed requests than this fraction: the run is invalid
    bursts: int = 1  # burst arrival: this many bursts of `requests`, each after the last ended
    request_timeout_s: float | None = None  # one request, send to finish; None: request_deadline
    phase_timeout_s: float = 900.0  # the whole phase; requests still out then are errors
    burstiness: float = 1.0  # rate arrival: gamma gaps of this shape (1: Poisson; < 1 burstier)
    ramp: str = ""  # rate arrival: "linear" or "exponential" from `rate` to `ramp_to`
    ramp_to: float | None = None  # the rate (requests/s) a ramp ends at
    trace: Trace | None = None  # trace arrival: the requests to replay, at their timestamps
    time_scale: float = 1.0  # trace arrival: 0.5 replays twice as fast
    max_lateness_ms: float = 50.0  # open loop: a p99 send lateness above this is INVALID
    dataset: Dataset | None = None  # prompts (and output lengths) sampled from a local file
    turns: int = 1  # > 1: each of `requests` is a conversation of this many chat turns
    think_time_s: float = 0.0  # between a conversation's answer and its next user message
    followup_tokens: int | None = None  # turns after the first: their user messages' length
    cancel_share: float = 0.0  # this share of the requests (a seeded choice) the client cancels
    cancel_after_tokens: int | None = None  # ... after this many tokens (0: before the first)
    cancel_after_ms: float | None = None  # ... or this long after sending
    settle_s: float = 0.0  # requests sent this long into the phase run but are not measured

    def __post_init__(self) -> None:
        where = f"phase {self.name!r}"
        if self.clients is None:  # an open loop sends each request when due: a slot for each
            slots = min(self.requests, MAX_OPEN_SLOTS) if self.arrival in OPEN_LOOP else 1
            object.__setattr__(self, "clients", slots)
        if self.arrival not in ARRIVALS:
            raise SuiteError(f"{where}: arrival must be one of {', '.join(ARRIVALS)}")
        if self.endpoint not in ENDPOINTS:
            raise SuiteError(f"{where}: endpoint must be one of {', '.join(ENDPOINTS)}")
        for key in ("clients", "requests", "max_tokens", "bursts"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SuiteError(f"{where}: {key} must be a positive integer, got {value!r}")
        if self.arrival == "rate" and not (
            self.rate is not None and finite(self.rate) and self.rate > 0
        ):
            raise SuiteError(f'{where}: arrival = "rate" needs a finite rate > 0 (requests/s)')
        if not (finite(self.temperature) and self.temperature >= 0):
            raise SuiteError(f"{where}: temperature must be a finite number >= 0")
        for key in ("request_timeout_s", "phase_timeout_s"):
            value = getattr(self, key)
            if value is not None and not (finite(value) and value > 0):
                raise SuiteError(f"{where}: {key} must be a finite number of seconds > 0")
        if self.bursts > 1 and self.arrival != "burst":
            raise SuiteError(f'{where}: bursts is only meaningful with arrival = "burst"')
        if self.arrival != "rate" and self.rate is not None:
            raise SuiteError(f'{where}: rate is only meaningful with arrival = "rate"')
        if not (finite(self.burstiness) and self.burstiness > 0):
            raise SuiteError(f"{where}: burstiness must be a finite number > 0 (1 is Poisson)")
        if self.ramp not in RAMPS:
            raise SuiteError(f"{where}: ramp must be linear or exponential")
        if (self.burstiness != 1.0 or self.ramp) and self.arrival != "rate":
            raise SuiteError(f'{where}: burstiness and ramp need arrival = "rate"')
        if bool(self.ramp) != (self.ramp_to is not None):
            raise SuiteError(f"{where}: a ramp needs both ramp and ramp_to")
        if (self.arrival == "trace") != (self.trace is not None):
            raise SuiteError(f'{where}: arrival = "trace" and a trace file go together')
        if self.trace is not None and self.requests != len(self.trace.requests):
            raise SuiteError(f"{where}: requests must be the trace's {len(self.trace.requests)}")
        if isinstance(self.turns, bool) or not isinstance(self.turns, int) or self.turns < 1:
            raise SuiteError(f"{where}: turns must be a positive integer")
        if not (finite(self.think_time_s) and self.think_time_s >= 0):
            raise SuiteError(f"{where}: think_time_s must be a finite number >= 0")
        if self.followup_tokens is not None and (
            isinstance(self.followup_tokens, bool) or not isinstance(self.followup_tokens, int)
            or self.followup_tokens < 1 or self.turns < 2
        ):  # fmt: skip
            raise SuiteError(f"{where}: followup_tokens must be a positive integer, with turns > 1")
        if self.turns > 1 and (
            self.endpoint != "chat" or self.arrival not in ("concurrency", "burst")
            or self.bursts > 1 or self.dataset is not None
        ):  # fmt: skip
            raise SuiteError(
                f'{where}: turns > 1 needs endpoint = "chat" and arrival = "concurrency" or '
                '"burst" (one burst), with generated prompts'
            )
        if self.dataset is not None and (self.trace is not None or self.prefix_tokens):
            raise SuiteError(f"{where}: a dataset's prompts take no trace and no prefix_tokens")
        for key in ("time_scale", "max_lateness_ms"):
            if not (finite(getattr(self, key)) and getattr(self, key) > 0):
                raise SuiteError(f"{where}: {key} must be a finite number > 0")
        if self.ramp_to is not None and not (finite(self.ramp_to) and self.ramp_to > 0):
            raise SuiteError(
                f"{where}: ramp_to must be a finite rate > 0 (a ramp cannot end at or below 0)"
            )
        rate = self.max_error_rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise SuiteError(f"{where}: max_error_rate must be a fraction from 0 to 1")
        if not 0 <= self.prefix_tokens < max(self.prompt_tokens.floor, 1):
            raise SuiteError(f"{where}: prefix_tokens must be >= 0 and below every prompt length")
        if not (finite(self.settle_s) and self.settle_s >= 0):
            raise SuiteError(f"{where}: settle_s must be a finite number of seconds >= 0")
        if self.settle_s and self.bursts > 1:
            raise SuiteError(f"{where}: settle_s measures one stretch of load, not bursts > 1")
        self._check_cancels(where)

    def _check_cancels(self, where: str) -> None:
        share, tokens, ms = self.cancel_share, self.cancel_after_tokens, self.cancel_after_ms
        if not (finite(share) and 0 <= share <= 1):
            raise SuiteError(f"{where}: cancel_share must be a fraction from 0 to 1")
        if share and (tokens is None) == (ms is None):
            raise SuiteError(f"{where}: cancel_share needs cancel_after_tokens or cancel_after_ms")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                                   or not 0 <= tokens < self.max_tokens):  # fmt: skip
            raise SuiteError(f"{where}: cancel_after_tokens must be whole, below max_tokens")
        if ms is not None and not (finite(ms) and ms > 0):
            raise SuiteError(f"{where}: cancel_after_ms must be a finite number > 0")
        if (tokens is not None or ms is not None) and not share:
            raise SuiteError(f"{where}: cancel_after_* needs a cancel_share > 0")

    @property
    def request_deadline_s(self) -> float:
        """How long one request may take, send to finish: the suite's, else 120 s plus 1 s per
        output token (a CPU serving SmolLM2 takes a few seconds; a stuck server, forever)."""
        return self.request_timeout_s or 120.0 + 1.0 * self.max_tokens

    @property
    def total_requests(self) -> int:
        """Every request the phase sends: `requests` per burst times `bursts`, times `turns`
        (each of a conversation's turns is a request)."""
        return self.requests * self.bursts * self.turns


def finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


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
    if "trace" in args:  # a path relative to the suite file; its requests are the phase's
        try:
            args["trace"] = read_trace(here / args["trace"])
        except TraceError as exc:
            raise SuiteError(f"{where}: {exc}") from None
        args.setdefault("requests", len(args["trace"].requests))
        args.setdefault("max_tokens", max(r.output_length for r in args["trace"].requests))
    if "dataset" in args:
        try:
            args["dataset"] = read_dataset(here / args["dataset"])
        except DatasetError as exc:
            raise SuiteError(f"{where}: {exc}") from None
    args["prompt_tokens"] = _length(args.get("prompt_tokens", 64), args["name"])
    expect = schema.check_values(args.get("expect", {}), (str, *schema.NUMBER), f"{where}: expect")
    try:
        args["expect"] = tuple(parse_rule(k, v) for k, v in expect.items())
    except ExpectError as exc:
        raise SuiteError(f"phase {args['name']!r}: {exc}") from None
    try:
        return Phase(**args)
    except TypeError as exc:
        raise SuiteError(f"phase {args['name']!r}: {exc}") from None


def _length(raw: object, phase: str) -> PromptLength:
    where = f"phase {phase!r}: prompt_tokens"
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
