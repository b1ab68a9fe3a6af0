"""Throwaway git repositories shaped like the servers `harness init` recognises: only the marker
files (manifests, a source file naming an endpoint); `python_server`, whose package runs
tests/helpers/scripted_server.py as its __main__, and `fastapi_server`, a FastAPI app
(tests/helpers/fastapi_app.py) with a requirements.txt: servers `harness check` can build
into a virtual environment of their own and start."""

from __future__ import annotations

from pathlib import Path

from helpers import SCRIPTED_SERVER, git

FASTAPI_APP = Path(__file__).with_name("fastapi_app.py")

SHAPES = {
    "vllm": {
        "pyproject.toml": '[project]\nname = "vllm"\n\n[project.scripts]\n'
        'vllm = "vllm.entrypoints.cli.main:main"\n',
        "vllm/__init__.py": "",
        "vllm/entrypoints/openai/api_server.py": '@router.post("/v1/chat/completions")\n',
    },
    "sglang": {
        "python/pyproject.toml": '[project]\nname = "sglang"\n',
        "python/sglang/__init__.py": "",
        "python/sglang/launch_server.py": "",
    },
    "llama.cpp": {
        "CMakeLists.txt": "project(llama.cpp C CXX)\nadd_subdirectory(tools)\n",
        "tools/server/CMakeLists.txt": "set(TARGET llama-server)\nadd_executable(${TARGET})\n",
    },
    "tgi": {
        "Cargo.toml": '[workspace]\nmembers = ["benchmark", "backends/v3", "launcher", "router"]\n',
        "launcher/Cargo.toml": '[package]\nname = "text-generation-launcher"\n',
        "router/Cargo.toml": '[package]\nname = "text-generation-router-v3"\n',
        "server/pyproject.toml": '[project]\nname = "text-generation-server"\n',
    },
    "cargo": {
        "Cargo.toml": '[package]\nname = "fast-serve"\nversion = "0.1.0"\n',
        "Cargo.lock": "",
        "src/main.rs": 'fn main() { route("/v1/chat/completions"); }\n',
    },
    "fastapi": {
        "requirements.txt": "fastapi\nuvicorn[standard]\n",
        "app/__init__.py": "",
        "app/main.py": "from fastapi import FastAPI\n\napp = FastAPI()\n\n\n"
        '@app.post("/v1/chat/completions")\nasync def chat(): ...\n',
    },
    "python": {
        "pyproject.toml": '[project]\nname = "tiny-serve"\n\n[project.scripts]\n'
        'tiny-serve = "tiny_serve.cli:main"\n',
        "src/tiny_serve/__init__.py": "",
        "src/tiny_serve/cli.py": 'ROUTES = ["/v1/completions", "/v1/chat/completions"]\n',
    },
}
SUITE = """\
model = "tiny-model"
[[phase]]
name = "load"
arrival = "concurrency"
clients = 2
requests = 4
prompt_tokens = 16
max_tokens = 4
[gate]
ttft_p50_ms = 0.25
"""


def shaped_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repository at `root` holding `files` (path -> text), committed."""
    root.mkdir(parents=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a server")
    return root


def python_server(root: Path) -> Path:
    """A Python package serving the OpenAI API (the scripted server as `python -m tinyserve`),
    with a small suite (suite.toml) and no project file: `harness init` writes it."""
    files = {
        "pyproject.toml": '[project]\nname = "tinyserve"\nversion = "0"\n'
        'dependencies = ["aiohttp"]\n',
        "tinyserve/__init__.py": "",
        "tinyserve/__main__.py": SCRIPTED_SERVER.read_text(),
        "suite.toml": SUITE,
        ".gitignore": "results/\n",
    }
    return shaped_repo(root, files)


def fastapi_server(root: Path) -> Path:
    """A FastAPI app serving the OpenAI API (`uvicorn app.main:app`), its dependencies in
    requirements.txt, with a small suite (suite.toml) and no project file."""
    files = {
        "requirements.txt": "fastapi\nuvicorn\n",
        "app/__init__.py": "",
        "app/main.py": FASTAPI_APP.read_text(),
        "suite.toml": SUITE,
        ".gitignore": "results/\n",
    }
    return shaped_repo(root, files)
