"""A team's server repository as GitHub Actions sees it: a bare `origin`, and the runner's
checkout of it. The server is the scripted server with its timings in `server.args`, built
and served as `servegate.toml` says, and gated by the team's own suite `perf/chat.toml`."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import SCRIPTED_SERVER, git

PROJECT = """\
[server]
name = "team-server"
serve = "{python} server.py --port {port} --model {model} {flags} @server.args"
"""
SUITE = """\
model = "team-model"
[[phase]]
name = "chat"
arrival = "concurrency"
clients = 4
requests = 12
prompt_tokens = 16
max_tokens = 6
[gate]
ttft_p50_ms = 0.15
"""
ARGS = {"ttft-ms": "40", "itl-ms": "10"}


class TeamRepo:
    def __init__(self, tmp_path: Path):
        self.origin, self.path = tmp_path / "origin.git", tmp_path / "workspace"
        seed = tmp_path / "seed"
        (seed / "perf").mkdir(parents=True)
        shutil.copy2(SCRIPTED_SERVER, seed / "server.py")
        (seed / "servegate.toml").write_text(PROJECT)
        (seed / "perf" / "chat.toml").write_text(SUITE)
        (seed / ".gitignore").write_text("results/\n")
        (seed / "server.args").write_text(args_text())
        git(seed, "init", "-q", "-b", "main")
        git(seed, "add", "-A")
        git(seed, "commit", "-qm", "server: 40 ms to the first token")
        git(tmp_path, "clone", "-q", "--bare", str(seed), str(self.origin))
        git(tmp_path, "clone", "-q", str(self.origin), str(self.path))

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def push(self, branch: str, subject: str, files: dict[str, str]) -> str:
        """Commit `files` (path -> text) on `branch` of the checkout, push it; the sha."""
        if self.git("branch", "--show-current") != branch:
            self.git("checkout", "-q", "-B", branch)
        for name, text in files.items():
            (self.path / name).write_text(text)
        self.git("commit", "-qam", subject)
        self.git("push", "-q", "origin", f"HEAD:{branch}")
        return self.git("rev-parse", "HEAD")


def args_text(**args: str) -> str:
    """server.args with some timings changed: `args_text(ttft_ms="80")`."""
    merged = ARGS | {k.replace("_", "-"): v for k, v in args.items()}
    return "".join(f"--{k}\n{v}\n" for k, v in merged.items())
