"""Arms: what server one run measures. A commit (or the working tree) of a project started as
its project file says, any OpenAI-compatible server started from a command template, or a
server already running at a URL."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.arms.project import (
    DEVICE_ENV,
    READY_TIMEOUT_S,
    RESIDENCY,
    SERVE_PLACEHOLDERS,
    Project,
    ProjectError,
    check_template,
)
from harness.arms.project import placeholders as template_names
from harness.arms.worktrees import Checkout

REPO_ROOT = Path(__file__).resolve().parents[2]  # the harness's own source (its version, commit)


class ArmError(ValueError):
    """An arm that cannot be built from the given options; the message is one line."""


@dataclass(frozen=True, slots=True)
class Arm:
    kind: str  # "project" | "command" | "url"
    model: str
    flags: str = ""
    template: str = ""
    server: str = ""  # the name a suite's flags table is keyed by ("" for a URL)
    url: str | None = None
    pid: int | None = None
    cwd: Path = Path(".")  # where the server runs; {worktree}
    env: tuple[tuple[str, str], ...] = ()  # added to the server's environment
    python: str = ""  # the interpreter {python} names; "" = this one
    ready_path: str = ""  # "" = /health, else /v1/models
    strict_counters: bool = False  # every counter series the suite expects must exist
    reports_commit: bool = False  # /health's "commit" must be the checkout's
    api_key: str = ""  # sent as Authorization: Bearer; never written to a report
    residency: str = RESIDENCY[0]  # one at a time; "together" where its project file says so
    ready_timeout_s: float = READY_TIMEOUT_S  # how long its cold start may take
    device: str = ""  # where it runs, as device_env takes it: "3", or a group "2,3"; "" = unplaced
    device_env: str = DEVICE_ENV
    gauges: tuple[str, ...] = ()  # /metrics gauges of its device memory (project file)
    gauge_scale: float = 1.0  # bytes per unit of those gauges

    @property
    def environment(self) -> dict[str, str]:
        """What is added to the server's environment: its own, and its device when placed."""
        placed = {self.device_env: self.device} if self.device else {}
        return dict(self.env) | placed

    @property
    def launches(self) -> bool:
        return self.kind != "url"

    @property
    def takes_flags(self) -> bool:
        return self.launches and "flags" in template_names(self.template)

    def command(self, port: int) -> list[str]:
        """The argv that starts this arm's server on `port`."""
        if not self.launches:
            raise ArmError("an arm given by a URL is not launched")
        values = {
            "python": shlex.quote(self.python or sys.executable),
            "port": str(port),
            "model": shlex.quote(self.model),
            "flags": self.flags,
            "worktree": shlex.quote(str(self.cwd.resolve())),
            "device": shlex.quote((self.device or "0").split(",")[0]),  # a group's first
            "devices": shlex.quote(self.device or "0"),
        }
        try:
            return shlex.split(self.template.format_map(values))
        except (KeyError, IndexError, ValueError) as exc:
            raise ArmError(
                f"bad server command {self.template!r} with flags {self.flags!r}: {exc}"
            ) from None

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "server": self.server,
            "model": self.model,
            "flags": self.flags,
            "template": self.template if self.launches else None,
            "url": self.url,
            "pid": self.pid,
            "cwd": str(self.cwd),
            "env": dict(self.env),
            "device": self.device or None,
            "api_key": "set" if self.api_key else None,
            "reports_commit": self.reports_commit,
        }


def program(cmd: str) -> str:
    """A command's program by name: `{python}` -> python, /opt/bin/llama-server -> llama-server."""
    try:
        tokens = shlex.split(cmd)
    except ValueError:
        tokens = cmd.split()
    first = (tokens or ["command"])[0]
    return Path(first.replace("{python}", "python")).name or first


def command_arm(model: str, flags: str, cmd: str, option: str = "--serve-cmd", **kw) -> Arm:
    """Any OpenAI-compatible server from a command template; it runs in the current folder."""
    try:
        check_template(cmd, SERVE_PLACEHOLDERS, option)
    except ProjectError as exc:
        raise ArmError(str(exc)) from None
    if "{port}" not in cmd:
        raise ArmError(f"{option} must contain {{port}} so the harness can pick a free port")
    return _checked(Arm("command", model, flags, cmd, program(cmd), cwd=Path.cwd(), **kw))


def url_arm(model: str, url: str, pid: int | None, option: str = "--url", **kw) -> Arm:
    """A server already running at `url`; with its pid, its memory is sampled too."""
    if not url.startswith(("http://", "https://")):
        raise ArmError(f"{option} must start with http:// or https://, got {url!r}")
    return Arm("url", model, url=url.rstrip("/"), pid=pid, **kw)


def project_arm(
    project: Project, co: Checkout, model: str, flags: str, env: tuple = (), **kw
) -> Arm:
    """A checkout of the project, started in its worktree as the project file says (`env` is
    added to the file's own)."""
    python = project.python.format(worktree=shlex.quote(str(co.path))) if project.python else ""
    arm = Arm(
        "project", model, flags, project.serve, project.name, cwd=co.path, env=project.env + env,
        python=python, ready_path=project.ready_path, strict_counters=project.strict_counters,
        reports_commit=project.reports_commit, residency=project.residency,
        ready_timeout_s=project.ready_timeout, device_env=project.device_env,
        gauges=project.gauges, gauge_scale=project.gauge_scale, **kw,
    )  # fmt: skip
    return _checked(arm)


def _checked(arm: Arm) -> Arm:
    arm.command(0)  # an unbalanced quote in the template or the flags fails now, not at launch
    return arm


def make_arm(
    model: str,
    flags: str = "",
    serve_cmd: str | None = None,
    url: str | None = None,
    pid: int | None = None,
    api_key: str = "",
) -> Arm:
    """`harness run`'s arm from --serve-cmd or --url (a project arm comes from project_arm)."""
    if serve_cmd and url:
        raise ArmError("give either --serve-cmd or --url, not both")
    if pid is not None and not url:
        raise ArmError("--pid only applies with --url (a launched server is sampled already)")
    if url:
        return url_arm(model, url, pid, api_key=api_key)
    if not serve_cmd:
        raise ArmError("make_arm needs --serve-cmd or --url")
    return command_arm(model, flags, serve_cmd, api_key=api_key)
