"""Suites: the TOML files under suites/ that say what load to fire, which counters must move in
each phase, and how much each gated metric may drift (docs/suites.md)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.files import shipped_dir
from harness.workload import schema
from harness.workload.expect import ExpectError, ExpectRule, parse_rule

SUITES_DIR = shipped_dir("suites")
ARRIVALS = ("burst", "concurrency", "rate")
ENDPOINTS = ("completions", "chat")
GATE_KEYS = ("ttft_p50_ms", "ttft_p95_ms", "tok_s", "peak_rss_bytes", "peak_device_bytes")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,79}")
ANY_SERVER = "*"  # `flags = "..."`: for whichever server the suite runs against
SLACK_KEY = "memory_slack_mib"  # absolute slack of the memory rule, beside the tolerances
DEFAULT_MEMORY_SLACK = 16 * 2**20


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
    clients: int = 1
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

    def __post_init__(self) -> None:
        where = f"phase {self.name!r}"
        if self.arrival not in ARRIVALS:
            raise SuiteError(f"{where}: arrival must be one of {', '.join(ARRIVALS)}")
        if self.endpoint not in ENDPOINTS:
            raise SuiteError(f"{where}: endpoint must be one of {', '.join(ENDPOINTS)}")
        for key in ("clients", "requests", "max_tokens", "bursts"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SuiteError(f"{where}: {key} must be a positive integer, got {value!r}")
        if self.arrival == "rate" and not (_finite(self.rate) and self.rate > 0):
            raise SuiteError(f'{where}: arrival = "rate" needs a finite rate > 0 (requests/s)')
        if not (_finite(self.temperature) and self.temperature >= 0):
            raise SuiteError(f"{where}: temperature must be a finite number >= 0")
        for key in ("request_timeout_s", "phase_timeout_s"):
            value = getattr(self, key)
            if value is not None and not (_finite(value) and value > 0):
                raise SuiteError(f"{where}: {key} must be a finite number of seconds > 0")
        if self.bursts > 1 and self.arrival != "burst":
            raise SuiteError(f'{where}: bursts is only meaningful with arrival = "burst"')
        if self.arrival != "rate" and self.rate is not None:
            raise SuiteError(f'{where}: rate is only meaningful with arrival = "rate"')
        rate = self.max_error_rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise SuiteError(f"{where}: max_error_rate must be a fraction from 0 to 1")
        if not 0 <= self.prefix_tokens < max(self.prompt_tokens.floor, 1):
            raise SuiteError(f"{where}: prefix_tokens must be >= 0 and below every prompt length")

    @property
    def request_deadline_s(self) -> float:
        """How long one request may take, send to finish: the suite's, else 120 s plus 1 s per
        output token (a CPU serving SmolLM2 takes a few seconds; a stuck server, forever)."""
        return self.request_timeout_s or 120.0 + 1.0 * self.max_tokens

    @property
    def total_requests(self) -> int:
        """Every request the phase sends: `requests` per burst times `bursts`."""
        return self.requests * self.bursts


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    path: Path
    model: str
    phases: tuple[Phase, ...]
    flags: dict[str, str] = field(default_factory=dict)  # server name -> flags; "*": any server
    description: str = ""
    warmup: Phase | None = None
    gate: dict[str, float] = field(default_factory=dict)
    memory_slack_bytes: int = DEFAULT_MEMORY_SLACK

    def flags_for(self, server: str) -> str:
        """The suite's flags for the server named `server` (its project's or program's name)."""
        return self.flags.get(server, self.flags.get(ANY_SERVER, ""))


def resolve(name_or_path: str) -> Path:
    """A path to a .toml file, or the name of a shipped suite (suites/NAME.toml)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise SuiteError(f"suite file not found: {name_or_path}")
        return path
    for root in (Path.cwd() / "suites", SUITES_DIR):
        if (root / f"{name_or_path}.toml").is_file():
            return root / f"{name_or_path}.toml"
    names = ", ".join(shipped()) or "none"
    raise SuiteError(f"no suite named {name_or_path!r} (shipped: {names})")


def shipped() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def load_suite(name_or_path: str) -> Suite:
    path = resolve(name_or_path)
    try:
        data = schema.read_toml(path)
    except schema.SchemaError as exc:
        raise SuiteError(str(exc)) from None
    try:
        return parse_suite(data, path)
    except (SuiteError, schema.SchemaError) as exc:
        raise SuiteError(f"{path}: {exc}") from None


def parse_suite(data: dict, path: Path) -> Suite:
    schema.check_table(data, schema.SUITE, "suite")
    if not data.get("model"):
        raise SuiteError("model must be a non-empty string")
    raw_phases = data.get("phase")
    if not isinstance(raw_phases, list) or not raw_phases:
        raise SuiteError("at least one [[phase]] table is required")
    phases = tuple(_phase(p, f"phase{i + 1}") for i, p in enumerate(raw_phases))
    names = [p.name for p in phases]
    if len(set(names)) != len(names) or "warmup" in names:
        raise SuiteError(f"phase names must be unique and not 'warmup', got {names}")
    warmup = _phase(data["warmup"], "warmup") if "warmup" in data else None
    if warmup and warmup.expect:
        raise SuiteError("warmup cannot have an expect table (it is not measured)")
    gate = dict(schema.check_values(data.get("gate", {}), schema.NUMBER, "gate"))
    _no_unknown(gate, {*GATE_KEYS, SLACK_KEY}, "gate")
    slack = gate.pop(SLACK_KEY, DEFAULT_MEMORY_SLACK / 2**20)
    if not _finite(slack) or slack < 0:
        raise SuiteError(f"gate.{SLACK_KEY} must be a number of MiB >= 0, got {slack!r}")
    for key, tol in gate.items():
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 10:
            raise SuiteError(f"gate.{key} must be a relative tolerance like 0.10, got {tol!r}")
    raw_flags = data.get("flags", "")
    by_server = raw_flags if isinstance(raw_flags, dict) else {ANY_SERVER: raw_flags}
    flags = {name: _flags(value, f"flags.{name}") for name, value in by_server.items()}
    name = str(data.get("name", path.stem))
    if not NAME.fullmatch(name):
        raise SuiteError(f"name {name!r} must be letters, digits, '.', '_' or '-' (it names files)")
    return Suite(
        name=name,
        path=path,
        model=data["model"],
        phases=phases,
        flags=flags,
        description=str(data.get("description", "")),
        warmup=warmup,
        gate={k: float(v) for k, v in gate.items()},
        memory_slack_bytes=int(slack * 2**20),
    )


def _flags(value: object, where: str) -> str:
    """Server flags as one string: a string, or an array of strings and numbers."""
    if isinstance(value, list):
        return " ".join(str(f) for f in schema.check_items(value, (str, *schema.NUMBER), where))
    if not isinstance(value, str):
        raise SuiteError(f"{where} must be a string or an array, got {value!r}")
    return value


def _phase(raw: object, default_name: str) -> Phase:
    if not isinstance(raw, dict):
        raise SuiteError(f"{default_name} must be a table")
    where = f"phase {raw.get('name', default_name)!r}"
    args = dict(schema.check_table(raw, schema.PHASE, where))
    args.setdefault("name", default_name)
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
            if not (_finite(raw["mean"]) and _finite(raw["std"]) and raw["std"] >= 0):
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


def _no_unknown(table: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {', '.join(unknown)}")
