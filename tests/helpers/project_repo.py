"""A throwaway git repository that is not servegate: a tiny server with a real build step and a
servegate.toml, its history seeded with a TTFT regression and a commit whose build fails. The
server is tests/helpers/scripted_server.py copied in; the build turns src/ttft_ms into the arguments
file the server needs (without a build, it cannot start) and records each build it makes."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

from helpers import SCRIPTED_SERVER, git
from helpers.cli import harness

BUILD = """\
import pathlib, sys
ttft = pathlib.Path("src/ttft_ms").read_text().strip()
if not ttft.isdigit():
    sys.exit(f"error: src/ttft_ms must be a whole number of milliseconds, got {ttft!r}")
pathlib.Path("build").mkdir(exist_ok=True)
pathlib.Path("build/server.args").write_text(f"--ttft-ms\\n{ttft}\\n--itl-ms\\n2\\n")
with open(sys.argv[2], "a") as builds:
    builds.write(f"{sys.argv[1]} {pathlib.Path.cwd()}\\n")
"""
PROJECT = """\
[server]
name = "tiny-server"
build = "{{python}} build.py {{commit}} {builds}"
serve = "{{python}} server.py --port {{port}} --model {{model}} {{flags}} @build/server.args"
residency = "together"  # small CPU servers: a round's start once, not per arm
"""
SUITE = """\
model = "{model}"
[warmup]
requests = 2
prompt_tokens = 8
max_tokens = 2
[[phase]]
name = "load"
arrival = "concurrency"
clients = 2
requests = 8
prompt_tokens = 16
max_tokens = 4
[gate]
ttft_p50_ms = 0.25
ttft_p95_ms = 0.25
"""


class ProjectRepo:
    """`commit(subject, ttft=...)` changes the server's TTFT; `builds()` counts builds per sha."""

    def __init__(self, tmp_path: Path, model: str):
        self.path = tmp_path / "tiny-server"
        self.builds_log = tmp_path / "builds.log"
        self.path.mkdir()
        shutil.copy2(SCRIPTED_SERVER, self.path / "server.py")
        (self.path / "build.py").write_text(BUILD)
        (self.path / "servegate.toml").write_text(PROJECT.format(builds=self.builds_log))
        (self.path / "suite.toml").write_text(SUITE.format(model=model))
        (self.path / ".gitignore").write_text("build/\nresults/\n")
        (self.path / "src").mkdir()
        (self.path / "src" / "ttft_ms").write_text("20\n")
        (self.path / "README").write_text("a tiny server\n")
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-qm", "server: answer in 20 ms")

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def commit(self, subject: str, ttft: str | None = None, readme: str | None = None) -> str:
        if ttft is not None:
            (self.path / "src" / "ttft_ms").write_text(ttft + "\n")
        if readme is not None:
            with (self.path / "README").open("a") as f:
                f.write(readme + "\n")
        self.git("commit", "-qam", subject)
        return self.git("rev-parse", "HEAD")

    def builds(self) -> Counter:
        """Builds of cached commit worktrees, by sha (working-tree builds left out)."""
        if not self.builds_log.exists():
            return Counter()
        lines = [line.split(" ", 1) for line in self.builds_log.read_text().splitlines()]
        return Counter(sha for sha, cwd in lines if Path(cwd) != self.path)

    def harness(self, *args: str, cache: Path) -> subprocess.CompletedProcess:
        return harness(*args, cwd=self.path, cache=cache, timeout=900)
