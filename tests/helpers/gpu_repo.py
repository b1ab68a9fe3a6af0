"""A throwaway repository whose server behaves, where the harness sees it, like vLLM on a GPU:
the scripted server holding an exclusive lock on its `{device}` (a second server there exits
with CUDA's out-of-memory line), ready only after a start of `start_ms`, exporting its device
memory as a Prometheus gauge, and slower on device 1 (`--device-speeds`). Its commits change
the arguments file the server reads (server.args)."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import SCRIPTED_SERVER, git

SERVE = (  # {device}: where the harness places it; the lock is that device's memory
    "{{python}} server.py --port {{port}} --model {{model}} {{flags}} @server.args "
    "--device-lock {locks}/gpu{{device}}.lock"
)
PROJECT = """\
[server]
name = "gpu-server"
serve = "{serve}"
ready_timeout = 120  # a GPU server's start: weights, graph capture

[server.device_memory]  # vLLM and SGLang say theirs on /metrics too (docs/projects.md)
gauges = ["scripted:device_memory_bytes"]
"""
SUITE = """\
model = "gpu-model"
[[phase]]
name = "load"
arrival = "concurrency"
clients = 4
requests = 16
prompt_tokens = 16
max_tokens = 8
[gate]
ttft_p50_ms = 0.15
tpot_ms = 0.10
peak_device_bytes = 0.10
"""
GROUP_SERVE = (  # a tensor-parallel server: every device of its group ({devices}) held
    "{{python}} server.py --port {{port}} --model {{model}} {{flags}} @server.args "
    "--device-locks {locks}"
)
ARGS = {"ttft-ms": "40", "itl-ms": "20", "device-bytes": "1e9", "device-speeds": "1.0,1.2"}


class GpuRepo:
    def __init__(self, tmp_path: Path, start_ms: int, serve: str = SERVE, **args: str):
        self.path, self.locks = tmp_path / "gpu-server", tmp_path / "devices"
        self.path.mkdir()
        self.locks.mkdir()
        more = {k.replace("_", "-"): v for k, v in args.items()}
        self.args = ARGS | {"load-ms": str(start_ms)} | more
        shutil.copy2(SCRIPTED_SERVER, self.path / "server.py")
        project = PROJECT.format(serve=serve.format(locks=self.locks))
        (self.path / "servegate.toml").write_text(project)
        (self.path / "suite.toml").write_text(SUITE)
        (self.path / ".gitignore").write_text("results/\n")
        (self.path / "README").write_text("a GPU server\n")
        self._write_args()
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-qm", "server: 40 ms to the first token, 20 ms a token, 1 GB")

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def _write_args(self) -> None:
        lines = [x for k, v in self.args.items() for x in (f"--{k}", v)]
        (self.path / "server.args").write_text("\n".join(lines) + "\n")

    def commit(self, subject: str, **args: str) -> str:
        """Change the server's arguments (`itl_ms="5.2"`), or only its README, and commit."""
        self.args |= {k.replace("_", "-"): v for k, v in args.items()}
        self._write_args()
        if not args:
            (self.path / "README").write_text(f"a GPU server: {subject}\n")
        self.git("commit", "-qam", subject)
        return self.git("rev-parse", "HEAD")
