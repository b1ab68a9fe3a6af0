"""Arms: what server one run measures. The working tree's reference engine, any
OpenAI-compatible server started from a command template, or a server already running at a URL."""

from __future__ import annotations

import shlex
import string
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE_TEMPLATE = "{python} -m engine.cli serve --model {model} --port {port} {flags}"
PLACEHOLDERS = {"python", "port", "model", "flags"}


class ArmError(ValueError):
    """An arm that cannot be built from the given options; the message is one line."""


@dataclass(frozen=True, slots=True)
class Arm:
    kind: str  # "engine" | "command" | "url"
    model: str
    flags: str = ""
    template: str = ENGINE_TEMPLATE
    url: str | None = None
    pid: int | None = None
    cwd: Path = REPO_ROOT
    env: tuple[tuple[str, str], ...] = ()  # added to the server's environment
    python: str = ""  # the interpreter {python} names; "" = this one

    @property
    def launches(self) -> bool:
        return self.kind != "url"

    @property
    def strict_counters(self) -> bool:
        """Only the reference engine is held to every series a suite names."""
        return self.kind == "engine"

    def command(self, port: int) -> list[str]:
        """The argv that starts this arm's server on `port`."""
        if not self.launches:
            raise ArmError("an arm given by --url is not launched")
        values = {
            "python": shlex.quote(self.python or sys.executable),
            "port": str(port),
            "model": shlex.quote(self.model),
            "flags": self.flags,
        }
        try:
            return shlex.split(self.template.format_map(values))
        except (KeyError, IndexError, ValueError) as exc:
            what = "server flags" if self.kind == "engine" else "server command"
            raise ArmError(
                f"bad {what} {self.template!r} with flags {self.flags!r}: {exc}"
            ) from None

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "model": self.model,
            "flags": self.flags,
            "template": self.template if self.launches else None,
            "url": self.url,
            "pid": self.pid,
            "cwd": str(self.cwd),
            "env": dict(self.env),
        }


def make_arm(
    model: str,
    flags: str = "",
    serve_cmd: str | None = None,
    url: str | None = None,
    pid: int | None = None,
) -> Arm:
    """Build the arm from CLI options: --url wins over --serve-cmd, which wins over the engine."""
    if serve_cmd and url:
        raise ArmError("give either --serve-cmd or --url, not both")
    if pid is not None and not url:
        raise ArmError("--pid only applies with --url (a launched server is sampled already)")
    if url:
        if not url.startswith(("http://", "https://")):
            raise ArmError(f"--url must start with http:// or https://, got {url!r}")
        return Arm("url", model, flags, url=url.rstrip("/"), pid=pid)
    if serve_cmd:
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(serve_cmd) if f is not None}
        except ValueError as exc:
            raise ArmError(f"bad --serve-cmd template: {exc}") from None
        unknown = names - PLACEHOLDERS
        if unknown:
            raise ArmError(
                f"--serve-cmd has unknown placeholder(s) {sorted(unknown)}; "
                "known: {port} {model} {flags} {python} (write {{ }} for literal braces)"
            )
        if "port" not in names:
            raise ArmError("--serve-cmd must contain {port} so the harness can pick a free port")
        arm = Arm("command", model, flags, template=serve_cmd, cwd=Path.cwd())
    else:
        arm = Arm("engine", model, flags)
    arm.command(0)  # an unbalanced quote in the template or the flags fails now, not at launch
    return arm
