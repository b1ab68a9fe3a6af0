"""Suites: the TOML files under suites/ that say what load to fire, which counters must move in
each phase, and how much each gated metric may drift (docs/suites.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.files import shipped_dir
from harness.results.metrics import GATEABLE
from harness.workload import schema
from harness.workload.arrival import Replay, SuiteError, at_rate, finite, whole
from harness.workload.capacity import CapacityError, CapacityPlan
from harness.workload.phase import Phase, PromptLength
from harness.workload.phase_table import parse_phase, parse_phases

SUITES_DIR = shipped_dir("suites")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,79}")
ANY_SERVER = "*"  # `flags = "..."`: for whichever server the suite runs against
SLACK_KEY = "memory_slack_mib"  # absolute slack of the memory rule, beside the tolerances
DEFAULT_MEMORY_SLACK = 16 * 2**20


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
    slo: dict[str, float] = field(default_factory=dict)  # per-request limits goodput counts
    client_procs: int = 0  # processes firing the requests (load/workers.py; 0: auto); not workload
    capacity: CapacityPlan | None = None  # [capacity]: after the phases, search the highest load

    def flags_for(self, server: str) -> str:
        """The suite's flags for the server named `server` (its project's or program's name)."""
        return self.flags.get(server, self.flags.get(ANY_SERVER, ""))


OVERRIDES = ("clients", "requests", "prompt_tokens", "max_tokens", "rate", "client_procs")
MAX_CLIENT_PROCS = 64
AUTO = 0  # client_procs = "auto": load/workers.py auto_procs picks from the streams and cores


def override(suite: Suite, **given: Any) -> Suite:
    """The suite with every measured phase's `clients`, `requests`, `prompt_tokens` (an exact
    length), `max_tokens` or `rate` (arrival = "rate") replaced where given: a first look
    needs no TOML. The phases change, so the fingerprint does; a value a phase cannot take is
    a SuiteError naming the option. `client_procs` changes how the load is fired, not the
    workload: the fingerprint stays."""
    changes = {k: v for k, v in given.items() if v is not None}
    if unknown := set(changes) - set(OVERRIDES):
        raise SuiteError(f"cannot override {', '.join(sorted(unknown))}")
    if "client_procs" in changes:  # how the load is fired, not what it is
        suite = replace(suite, client_procs=parse_client_procs(changes.pop("client_procs")))
    if not changes:
        return suite
    phases = []
    for phase in suite.phases:
        for key, value in changes.items():  # applied in turn: an error names its own
            try:
                phase = replace(phase, **_override(phase, key, value, "clients" in changes))
            except SuiteError as exc:
                raise SuiteError(f"--{key.replace('_', '-')}: {exc}") from None
        phases.append(phase)
    return replace(suite, phases=tuple(phases))


def _override(phase: Phase, key: str, value: Any, clients_given: bool) -> dict[str, Any]:
    """The phase fields that `--KEY value` sets."""
    if key == "prompt_tokens":
        return {"prompt_tokens": PromptLength(value=int(value))}
    if key == "clients" and not whole(value, 1):
        raise SuiteError(f"clients must be a positive integer, got {value!r}")  # 0: unset
    if key != "rate":
        return {key: value}
    if isinstance(phase.arrival, Replay):
        raise SuiteError(f"phase {phase.name!r}: a trace's requests arrive at its own times")
    # an open loop: a slot for each request unless --clients says
    return {"arrival": at_rate(phase.arrival, value)} | ({} if clients_given else {"clients": 0})


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


DEFAULT_SUITE = "short-concurrency"  # what `harness ab` and `harness bisect` run without --suite
CI_SUITES = ("boundary-spill", "long-transient", "prefill-storm")  # the workflow's gate step


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
    here = path.parent
    phases = tuple(
        p for i, raw in enumerate(raw_phases) for p in parse_phases(raw, f"phase{i + 1}", here)
    )
    names = [p.name for p in phases]
    if len(set(names)) != len(names) or "warmup" in names:
        raise SuiteError(f"phase names must be unique and not 'warmup', got {names}")
    warmup = parse_phase(data["warmup"], "warmup", here) if "warmup" in data else None
    if warmup and warmup.expect:
        raise SuiteError("warmup cannot have an expect table (it is not measured)")
    gate = dict(schema.check_values(data.get("gate", {}), schema.NUMBER, "gate"))
    _no_unknown(gate, {*GATEABLE, SLACK_KEY}, "gate")
    slack = gate.pop(SLACK_KEY, DEFAULT_MEMORY_SLACK / 2**20)
    if not finite(slack) or slack < 0:
        raise SuiteError(f"gate.{SLACK_KEY} must be a number of MiB >= 0, got {slack!r}")
    for key, tol in gate.items():
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 10:
            raise SuiteError(f"gate.{key} must be a relative tolerance like 0.10, got {tol!r}")
    slo = dict(schema.check_table(data.get("slo", {}), schema.SLO, "slo"))
    for key, limit in slo.items():
        if not (finite(limit) and limit > 0):
            raise SuiteError(f"slo.{key} must be a number of milliseconds > 0, got {limit!r}")
    if "goodput_req_s" in gate and not slo:
        raise SuiteError("gate.goodput_req_s needs an [slo] table (ttft_ms, tpot_ms, e2e_ms)")
    capacity = _capacity(data.get("capacity"), slo)
    if "capacity_req_s" in gate and capacity is None:
        raise SuiteError("gate.capacity_req_s needs a [capacity] table (the search to run)")
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
        slo={k: float(v) for k, v in slo.items()},
        client_procs=parse_client_procs(data.get("client_procs", "auto")),
        capacity=capacity,
    )


def _capacity(table: dict | None, slo: dict) -> CapacityPlan | None:
    if table is None:
        return None
    schema.check_table(table, schema.CAPACITY, "capacity")
    if not slo:
        raise SuiteError("[capacity] needs an [slo] table: the limits a level must meet")
    keys = {"max": "most"}
    try:
        return CapacityPlan(**{keys.get(k, k): v for k, v in table.items()})
    except CapacityError as exc:
        raise SuiteError(str(exc)) from None


def parse_client_procs(n: object) -> int:
    """A count of client processes, or "auto" (AUTO)."""
    if isinstance(n, str) and n.strip().lower() == "auto":
        return AUTO
    if isinstance(n, str) and n.strip().isdigit():
        n = int(n)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CLIENT_PROCS:
        raise SuiteError(f'client_procs must be a whole number from 1 to {MAX_CLIENT_PROCS} or '
                         f'"auto", got {n!r}')  # fmt: skip
    return n


def _flags(value: object, where: str) -> str:
    """Server flags as one string: a string, or an array of strings and numbers."""
    if isinstance(value, list):
        return " ".join(str(f) for f in schema.check_items(value, (str, *schema.NUMBER), where))
    if not isinstance(value, str):
        raise SuiteError(f"{where} must be a string or an array, got {value!r}")
    return value


def _no_unknown(table: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {', '.join(unknown)}")
