"""What `harness init` reads of a repository, and only files: its manifests' text and which
paths exist, relative to its root. The one door to the filesystem; shapes.py reads the record."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.files import read_regular

MANIFESTS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "CMakeLists.txt",
    "Cargo.toml",
    "requirements.txt",
)
NOT_SERVED = {"tests", "test", "docs", "examples", "benchmarks"}  # no app is looked for there
SKIP = {".git", ".venv", "venv", "node_modules", "build", "target", "dist", "__pycache__",
        ".tox", "results", "third_party", "3rdparty"}  # fmt: skip
MAX_DEPTH = 4  # vllm/entrypoints/openai/api_server.py is as deep as a marker goes
MAX_PATHS = 50_000
MAX_TEXT_BYTES = 256 * 1024
MAX_SOURCE_BYTES = 1024 * 1024
API_PATHS = (b"/v1/chat/completions", b"/v1/completions")  # an OpenAI-compatible server's


@dataclass(frozen=True)
class Snapshot:
    """A repository as `harness init` sees it: paths (relative, `/`-separated, at most
    MAX_DEPTH folders deep) and the text of its manifests (MANIFESTS, at any of those depths)."""

    paths: frozenset[str]
    texts: dict[str, str]

    def has(self, path: str) -> bool:
        return path in self.paths

    def text(self, path: str) -> str:
        return self.texts.get(path, "")


def snapshot(root: Path) -> Snapshot:
    """The files under `root` (build outputs, virtual environments and .git left out)."""
    paths, texts = set(), {}
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        depth = len(rel.parts)
        dirs[:] = sorted(d for d in dirs if d not in SKIP and depth < MAX_DEPTH)
        for name in files:
            path = (rel / name).as_posix()
            paths.add(path)
            if name in MANIFESTS:
                texts[path] = _read(Path(folder) / name, MAX_TEXT_BYTES)
        if len(paths) > MAX_PATHS:
            break
    return Snapshot(frozenset(paths), texts)


def mentions_api(root: Path, package: str) -> bool:
    """Whether a Python source file of the folder `package` (relative to `root`) names an
    OpenAI endpoint path: the sign of a package that serves the API."""
    for folder, dirs, files in os.walk(root / package):
        dirs[:] = [d for d in dirs if d not in SKIP]
        for name in files:
            if name.endswith(".py"):
                data = _bytes(Path(folder) / name, MAX_SOURCE_BYTES)
                if any(marker in data for marker in API_PATHS):
                    return True
    return False


IDENTIFIER = re.compile(r"[A-Za-z_]\w{0,99}", re.ASCII)
APP = re.compile(rb"(?m)^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=\s*(?:fastapi\.)?FastAPI\(")


def asgi_app(root: Path) -> tuple[str, str] | None:
    """(the module's path, the name) of the first FastAPI app assigned at a module's top level
    whose top folder's source (or the module itself, at the root) names an OpenAI endpoint."""
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP | NOT_SERVED and len(rel.parts) < MAX_DEPTH
        )
        if not all(IDENTIFIER.fullmatch(part) for part in rel.parts):
            continue  # not importable; and a name that reaches the serve line is a module's
        for name in sorted(f for f in files if IDENTIFIER.fullmatch(f.removesuffix(".py"))
                           and f.endswith(".py")):  # fmt: skip
            data = _bytes(Path(folder) / name, MAX_SOURCE_BYTES)
            if not (found := APP.search(data)):
                continue
            path = (rel / name).as_posix()
            top = rel.parts[:2] if rel.parts[:1] == ("src",) else rel.parts[:1]
            if any(m in data for m in API_PATHS) or (top and mentions_api(root, "/".join(top))):
                return path, found.group(1).decode()
    return None


def _bytes(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file; nothing from a FIFO, a device or a folder, so
    no file of a repository can hang init."""
    try:
        return read_regular(path, limit)
    except OSError:
        return b""


def _read(path: Path, limit: int) -> str:
    return _bytes(path, limit).decode("utf-8", "replace")
