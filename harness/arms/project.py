"""The project file: `servegate.toml` at the root of the repository under test says how to build
one of its commits and how to serve it (docs/projects.md). Every arm served from a git ref is
built and started from it, this repository's reference engine included."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.results.verdicts import INCONCLUSIVE_CHOICES
from harness.workload import schema

FILE_NAME = "servegate.toml"
SERVE_PLACEHOLDERS = {"python", "port", "model", "flags", "worktree", "device", "devices"}
BUILD_PLACEHOLDERS = {"python", "worktree", "commit"}
ALLOWED = {"serve": SERVE_PLACEHOLDERS, "build": BUILD_PLACEHOLDERS, "python": {"worktree"}}
SERVER = {
    "name": str, "build": str, "serve": str, "python": str, "model": str, "ready_path": str,
    "env": schema.TABLE, "strict_counters": bool, "reports_commit": bool,
    "isolated": schema.TABLE, "build_timeout": schema.NUMBER, "residency": str,
    "ready_timeout": schema.NUMBER, "devices": schema.ARRAY, "device_env": str,
    "device_memory": schema.TABLE,
}  # fmt: skip
# gauges on the server's own /metrics that say how much device memory it holds (summed over
# their series, times `scale` bytes per unit): for a server given by URL or in a container
DEVICE_MEMORY = {"gauges": schema.ARRAY, "scale": schema.NUMBER}
# how many of an A/B's servers may be up at once: one at a time (start, measure, stop, then
# the next) is safe for a server that holds its device (vLLM reserves 90% of a GPU); together
# (a round's servers start at once, one start's wait per round) only where they can share it
RESIDENCY = ("one-at-a-time", "together")
ISOLATED = {"build": str, "python": str, "env": schema.TABLE, "build_timeout": schema.NUMBER}
BUILD_TIMEOUT_S = 1800.0  # a build that runs longer is stopped: exit 2 with its log's tail
READY_TIMEOUT_S = 180.0  # a server that is not ready by then failed to start
DEVICE_ENV = "CUDA_VISIBLE_DEVICES"  # set to the arm's device (or group) when --devices places it


class ProjectError(ValueError):
    """A project file that is missing or does not validate; the message is one line."""


@dataclass(frozen=True)
class Project:
    """How to build and serve one commit of the project (the [server] table)."""

    name: str  # what a suite's `flags = {NAME = "..."}` table is keyed by
    serve: str  # command template, run in the commit's worktree
    path: Path  # the file it came from
    build: str = ""  # shell command run once per commit in its worktree ("" = nothing to build)
    build_timeout: float = BUILD_TIMEOUT_S  # seconds a build may run before it is stopped
    python: str = ""  # what {python} names ("" = the harness's own interpreter)
    model: str = ""  # the model to serve when --model is not given ("" = the suite's)
    ready_path: str = ""  # polled for readiness ("" = /health, else /v1/models)
    env: tuple[tuple[str, str], ...] = ()
    strict_counters: bool = False  # every counter series a suite expects must exist
    reports_commit: bool = False  # /health says which commit serves; it must be the arm's
    residency: str = RESIDENCY[0]  # a key of RESIDENCY
    ready_timeout: float = READY_TIMEOUT_S  # seconds a cold start may take (weights, graphs)
    devices: tuple[str, ...] = ()  # where arms run (`--devices`); () = wherever they start
    device_env: str = DEVICE_ENV  # the variable that tells the server its device
    gauges: tuple[str, ...] = ()  # [server.device_memory] gauges
    gauge_scale: float = 1.0  # bytes per unit of those gauges
    budget_minutes: float | None = None  # [gate]: what a CI job gives an A/B (`--budget-minutes`)
    inconclusive: str | None = None  # [gate]: "fail" makes an undecided A/B exit 1
    suite: str = ""  # [gate]: the suite `ab`, `bisect` and `check` run here without --suite
    isolated: dict = field(default_factory=dict)  # [server.isolated]: what --isolated replaces

    def variant(self, isolated: bool) -> Project:
        """The project as `--isolated` asks for it (its [server.isolated] keys replacing)."""
        if not isolated:
            return self
        if not self.isolated:
            raise ProjectError(
                f"--isolated: {self.path} has no [server.isolated] table (a build and the "
                "python it installs; docs/projects.md)"
            )
        env = dict(self.env) | dict(self.isolated.get("env", {}))
        keys = {k: v for k, v in self.isolated.items() if k != "env"}
        return replace(self, **keys, env=tuple(env.items()), isolated={})


def find_project(root: Path, path: Path | None = None) -> Project:
    """The project file at the root of the repository `root`, or the one `path` names
    (`--project`: a CI job judges a pull request by its base branch's file)."""
    if path is not None:
        if not path.is_file():
            raise ProjectError(f"--project {path}: no such file")
        return load_project(path)
    path = root / FILE_NAME
    if not path.is_file():
        raise ProjectError(
            f"no {FILE_NAME} in {root}: an arm served from a git ref is built and started as "
            f"the project file says (docs/projects.md); or give the arms as --base-cmd/--head-cmd"
        )
    return load_project(path)


def load_project(path: Path) -> Project:
    try:
        return parse_project(schema.read_toml(path), path)
    except (ProjectError, schema.SchemaError) as exc:
        raise ProjectError(f"{path}: {exc}") from None


GATE = {"budget_minutes": schema.NUMBER, "inconclusive": str, "suite": str}


def parse_project(data: dict, path: Path) -> Project:
    schema.check_table(data, {"server": schema.TABLE, "gate": schema.TABLE}, "the file")
    gate = schema.check_table(data.get("gate", {}), GATE, "[gate]")
    if not 0 < gate.get("budget_minutes", 1) <= 7 * 24 * 60:
        raise ProjectError(f"[gate] budget_minutes must be above 0, got {gate['budget_minutes']!r}")
    if gate.get("inconclusive", "pass") not in INCONCLUSIVE_CHOICES:
        raise ProjectError(f'[gate] inconclusive must be "pass" or "fail", got '
                           f"{gate['inconclusive']!r}")  # fmt: skip
    server = schema.check_table(data.get("server", {}), SERVER, "[server]")
    if not server.get("serve"):
        raise ProjectError('[server] needs serve = "COMMAND TEMPLATE with {port}"')
    isolated = schema.check_table(server.get("isolated", {}), ISOLATED, "[server.isolated]")
    for key, text in (("serve", server["serve"]), *_commands(server), *_commands(isolated)):
        check_template(text, ALLOWED[key], f"[server] {key}")
    if "{port}" not in server["serve"]:
        raise ProjectError("[server] serve must contain {port} so the harness can pick a port")
    for where, env in (("env", server.get("env", {})), ("isolated.env", isolated.get("env", {}))):
        schema.check_values(env, str, f"[server] {where}")
    check_ready_path(server.get("ready_path", ""))
    if server.get("residency", RESIDENCY[0]) not in RESIDENCY:
        raise ProjectError(
            f"[server] residency must be {' or '.join(map(repr, RESIDENCY))}, "
            f"got {server['residency']!r}"
        )
    memory = schema.check_table(server.get("device_memory", {}), DEVICE_MEMORY,
                                "[server.device_memory]")  # fmt: skip
    gauges = schema.check_items(memory.get("gauges", []), str, "[server.device_memory] gauges")
    devices = check_devices(server.get("devices", []), "[server] devices")
    if not 0 < memory.get("scale", 1) < 2**64:
        raise ProjectError(f"[server.device_memory] scale must be above 0, got {memory['scale']!r}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", server.get("device_env", DEVICE_ENV)):
        raise ProjectError(f"[server] device_env {server['device_env']!r} is not a variable name")
    if not 0 < server.get("ready_timeout", 1) <= 86400:
        raise ProjectError(
            f"[server] ready_timeout must be seconds, above 0 and at most a day, "
            f"got {server['ready_timeout']!r}"
        )
    for where, table in (("[server]", server), ("[server.isolated]", isolated)):
        if not 0 < table.get("build_timeout", 1) <= 7 * 86400:
            raise ProjectError(
                f"{where} build_timeout must be seconds, above 0 and at most a week, "
                f"got {table['build_timeout']!r}"
            )
    return Project(
        name=server.get("name") or path.parent.name,
        serve=server["serve"],
        path=path,
        build=server.get("build", ""),
        build_timeout=float(server.get("build_timeout", BUILD_TIMEOUT_S)),
        python=server.get("python", ""),
        model=server.get("model", ""),
        ready_path=server.get("ready_path", ""),
        env=tuple(server.get("env", {}).items()),
        strict_counters=server.get("strict_counters", False),
        reports_commit=server.get("reports_commit", False),
        residency=server.get("residency", RESIDENCY[0]),
        ready_timeout=float(server.get("ready_timeout", READY_TIMEOUT_S)),
        devices=devices,
        device_env=server.get("device_env", DEVICE_ENV),
        gauges=tuple(gauges),
        gauge_scale=float(memory.get("scale", 1)),
        budget_minutes=gate.get("budget_minutes"),
        inconclusive=gate.get("inconclusive"),
        suite=gate.get("suite", ""),
        isolated=isolated,
    )


def check_devices(items: list, where: str) -> tuple[str, ...]:
    """The devices arms are placed on, each as its CUDA_VISIBLE_DEVICES value: a device name
    (`0`, `1`, a UUID), or a group joined by `+` (`0+1`, for a tensor-parallel server) given
    as `0,1`. Every device once, every group the same size; ProjectError with one line
    otherwise."""
    groups = [str(d).split("+") for d in schema.check_items(items, (str, int), where)]
    names = [name for group in groups for name in group]
    bad = [d for d in names if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", d)]
    if bad or len(set(names)) != len(names):
        why = f"{bad[0]!r} is not a device name" if bad else "a device is named twice"
        raise ProjectError(f"{where}: {why} (give them as 0,1, their UUIDs, or groups 0+1,2+3)")
    if len({len(g) for g in groups}) > 1:
        raise ProjectError(
            f"{where}: groups of different sizes ({', '.join('+'.join(g) for g in groups)}); "
            "each arm holds as many devices as the others"
        )
    return tuple(",".join(g) for g in groups)


def device_list(devices: tuple[str, ...]) -> str:
    """Devices as `--devices` takes them: `0,1`, or groups `0+1,2+3`."""
    return ",".join(d.replace(",", "+") for d in devices)


def check_ready_path(ready: str) -> None:
    """`ready_path` is a path on the server the harness started, nothing else: it starts with
    one `/` (no scheme, no host), has no `.` or `..` segment, no space, no control character
    and no backslash; ProjectError with one line otherwise."""
    if not ready:
        return
    bad = (
        not re.fullmatch(r"/[!-~]{0,200}", ready)  # printable ASCII, no space
        or ready.startswith("//")  # a host: //evil.example/x
        or "\\" in ready
        or any(seg in (".", "..") for seg in ready.split("?", 1)[0].split("/"))
    )
    if bad:
        raise ProjectError(
            f"[server] ready_path {ready!r} must be a path on the server: starting with one "
            "'/', no '.' or '..' segment, no scheme or host, no spaces or control characters"
        )


def _commands(table: dict) -> list[tuple[str, str]]:
    return [(k, table[k]) for k in ("build", "python") if table.get(k)]


def placeholders(template: str) -> set[str]:
    """The {names} a template uses; ValueError for unbalanced braces."""
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


def check_template(template: str, allowed: set[str], where: str) -> None:
    try:
        names = placeholders(template)
    except ValueError as exc:
        raise ProjectError(f"{where}: bad template: {exc}") from None
    if unknown := names - allowed:
        known = " ".join(f"{{{n}}}" for n in sorted(allowed))
        raise ProjectError(
            f"{where}: unknown placeholder(s) {sorted(unknown)}; known: {known} "
            "(write {{ }} for literal braces)"
        )
