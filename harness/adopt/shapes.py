"""The servers `harness init` recognises from a repository's files, each as what its project
file needs (how a commit is built, how it is served) with every guess made on the way said as
one. Pure: it reads a Snapshot (repository.py) and asks `mentions_api` about Python packages."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.adopt.repository import Snapshot

HUB_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # small: a first gate that starts in a minute
GGUF_MODEL = "/models/SmolLM2-135M-Instruct-Q4_K_M.gguf"
GPU_READY_TIMEOUT = 900  # a GPU server's cold start: weights, compilation, CUDA graphs
GPU_BUILD_TIMEOUT = 3600
VENV = "{python} -m venv .venv && "  # each commit's own environment, in its worktree
GPU_SUITE = "gpu-chat"  # 64 chat streams, lengths from a production chat trace
CPU_SUITE = "short-concurrency"  # 4 chat clients, 128-token prompts
LOOKED_FOR = (
    "vLLM (a Python package named vllm), SGLang (sglang), text-generation-inference (a Cargo "
    "workspace with router and launcher), llama.cpp (a llama-server CMake target), a Cargo "
    "binary, a Python package with a console script or __main__.py whose source names "
    "/v1/chat/completions or /v1/completions, a FastAPI app in a module whose package names them"
)


@dataclass(frozen=True)
class Guess:
    """What `harness init` assumed: said as `assumed: ...` and written above `key`."""

    key: str  # the [server] key it shaped, or "runs-on" (the workflow's runner)
    text: str


@dataclass(frozen=True)
class Shape:
    """A recognised server and the project file it needs."""

    kind: str  # vLLM, SGLang, TGI, llama.cpp, Cargo, Python
    evidence: str  # the files that said so
    name: str
    serve: str
    build: str = ""
    build_timeout: int | None = None
    model: str = ""
    env: tuple[tuple[str, str], ...] = ()
    ready_path: str = ""  # "" = the harness's default (/health, else /v1/models)
    ready_timeout: int | None = None
    gpu: bool = False  # needs a GPU runner; one server per device
    gauge: str = ""  # its KV pool's /metrics gauge, written commented out: its scale is
    gauge_scale: str = ""  # this, in words, which no file of the repository says
    guesses: tuple[Guess, ...] = ()

    @property
    def suite(self) -> str:
        """The shipped suite its gate runs: a GPU-sized load for a GPU server."""
        return GPU_SUITE if self.gpu else CPU_SUITE


@dataclass(frozen=True)
class PythonMeta:
    name: str
    scripts: dict[str, str]  # console script -> "module:attribute"


def recognise(
    files: Snapshot,
    mentions_api: Callable[[str], bool],
    asgi_app: Callable[[], tuple[str, str] | None] = lambda: None,
) -> Shape | None:
    """The first server shape the files match, in the order LOOKED_FOR names them; None when
    none does. `mentions_api(folder)`: whether a Python package's source names an endpoint;
    `asgi_app()`: (a module's path, its FastAPI object's name) serving one, if any."""
    for find in (_vllm, _sglang, _tgi, _llama_cpp, _cargo):
        if shape := find(files):
            return _placed(shape)
    shape = _python(files, mentions_api) or _fastapi(files, asgi_app())
    return _placed(shape) if shape else None


def _placed(shape: Shape) -> Shape:
    runner = (
        "the workflow runs on a self-hosted runner with a GPU, labelled `gpu`"
        if shape.gpu
        else "the workflow runs on GitHub's hosted ubuntu-latest runner (a CPU)"
    )
    return replace(shape, guesses=(*shape.guesses, Guess("runs-on", runner)))


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def python_meta(files: Snapshot, folder: str = "") -> PythonMeta | None:
    """A Python project's name and console scripts, from pyproject.toml, setup.cfg or setup.py
    in `folder`; None when there is no such project."""
    at = f"{folder}/" if folder else ""
    name, scripts = "", dict[str, str]()
    if text := files.text(at + "pyproject.toml"):
        data = _toml(text)
        project, poetry = _table(data, "project"), _table(_table(data, "tool"), "poetry")
        name = str(project.get("name") or poetry.get("name") or "")
        for table in (_table(project, "scripts"), _table(poetry, "scripts")):
            scripts |= {str(k): v for k, v in table.items() if isinstance(v, str)}
    for manifest, pattern in (("setup.cfg", r"(?m)^name\s*=\s*(\S+)"),
                              ("setup.py", r"""\bname\s*=\s*["']([^"']+)["']""")):  # fmt: skip
        text = files.text(at + manifest)
        if not name and (found := re.search(pattern, text)):
            name = found.group(1)
        for script, target in re.findall(r"([\w.-]+)\s*=\s*([\w.]+:[\w.]+)", text):
            scripts.setdefault(script, target)
    if not name and not scripts and not files.has(at + "pyproject.toml"):
        return None
    return PythonMeta(name, scripts)


def _vllm(files: Snapshot) -> Shape | None:
    meta = python_meta(files)
    named = meta is not None and normalized(meta.name) == "vllm"
    if not named and not files.has("vllm/entrypoints/openai/api_server.py"):
        return None
    cli = meta is not None and "vllm" in meta.scripts
    serve = (
        "{worktree}/.venv/bin/vllm serve {model} --port {port} {flags}"
        if cli
        else "{worktree}/.venv/bin/python -m vllm.entrypoints.openai.api_server "
        "--model {model} --port {port} {flags}"
    )
    evidence = "a Python package named vllm" + (", console script vllm" if cli else "")
    return Shape(
        "vLLM", evidence, "vllm", serve,
        build=VENV + "VLLM_USE_PRECOMPILED=1 .venv/bin/pip install -e .",
        build_timeout=GPU_BUILD_TIMEOUT, model=HUB_MODEL, ready_path="/health",
        ready_timeout=GPU_READY_TIMEOUT, gpu=True, gauge="vllm:kv_cache_usage_perc",
        gauge_scale='the KV pool\'s bytes ("Available KV cache memory" in its start log)',
        guesses=(
            Guess("build", "each commit gets its own .venv, vLLM installed from its source "
                  "with precompiled kernels (VLLM_USE_PRECOMPILED=1): right for Python "
                  "changes; a commit that changes csrc/ needs a full build (drop the variable)"),
            _hub_model(),
            _gauge_guess("vllm:kv_cache_usage_perc"),
        ),
    )  # fmt: skip


def _sglang(files: Snapshot) -> Shape | None:
    folder = next((f for f in ("python", "") if _named(files, f, "sglang")), None)
    if folder is None:
        folder = next((f for f in ("python", "") if files.has(_at(f, "sglang/launch_server.py"))),
                      None)  # fmt: skip
    if folder is None:
        return None
    where = f"./{folder}" if folder else "."
    return Shape(
        "SGLang", f"a Python package named sglang in {where}", "sglang",
        "{worktree}/.venv/bin/python -m sglang.launch_server --model-path {model} "
        "--port {port} --enable-metrics {flags}",  # /metrics is off without it
        build=VENV + f".venv/bin/pip install -e '{where}[all]'",
        build_timeout=GPU_BUILD_TIMEOUT, model=HUB_MODEL, ready_path="/health",
        ready_timeout=GPU_READY_TIMEOUT, gpu=True, gauge="sglang:num_used_tokens",
        gauge_scale="bytes per KV token: 2 x layers x KV heads x head dim x dtype bytes "
        "(131072 for Llama-3-8B in bf16)",
        guesses=(
            Guess("build", f"each commit gets its own .venv with SGLang installed from "
                  f"{where} (pip install -e '{where}[all]')"),
            _hub_model(),
            _gauge_guess("sglang:num_used_tokens"),
        ),
    )  # fmt: skip


def _tgi(files: Snapshot) -> Shape | None:
    members = _table(_toml(files.text("Cargo.toml")), "workspace").get("members", [])
    launcher = 'name = "text-generation-launcher"' in files.text("launcher/Cargo.toml")
    if not launcher and not {"router", "launcher"} <= set(
        members if isinstance(members, list) else []
    ):
        return None
    return Shape(
        "TGI", "a Cargo workspace with router and launcher (text-generation-inference)",
        "text-generation-inference",
        "{worktree}/target/release/text-generation-launcher --model-id {model} --port {port} "
        "{flags}",
        build="cargo build --release", build_timeout=GPU_BUILD_TIMEOUT, model=HUB_MODEL,
        ready_path="/health", ready_timeout=GPU_READY_TIMEOUT, gpu=True,
        guesses=(
            Guess("build", "only the Rust launcher and router are built per commit; the "
                  "launcher starts text-generation-router and the Python shards "
                  "(text-generation-server) it finds on PATH: install them on the runner, and "
                  "add `cd server && make install` to build to gate changes to server/"),
            _hub_model(),
        ),
    )  # fmt: skip


def _llama_cpp(files: Snapshot) -> Shape | None:
    targets = [p for p in ("tools/server/CMakeLists.txt", "examples/server/CMakeLists.txt")
               if "llama-server" in files.text(p)]  # fmt: skip
    if not files.has("CMakeLists.txt") or not targets:
        return None
    return Shape(
        "llama.cpp", f"CMakeLists.txt with a llama-server target ({targets[0]})", "llama-server",
        "{worktree}/build/bin/llama-server -m {model} --port {port} {flags}",
        build="CCACHE_BASEDIR={worktree} CCACHE_NOHASHDIR=1 cmake -B build -DLLAMA_CURL=OFF "
        "-DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF && "
        "CCACHE_BASEDIR={worktree} CCACHE_NOHASHDIR=1 "
        'cmake --build build --target llama-server -j"$(nproc)"',
        model=GGUF_MODEL, ready_path="/health",
        guesses=(
            Guess("build", "a CPU build: add the backend your runner has (-DGGML_CUDA=ON); "
                  "with ccache installed (llama.cpp uses it by itself), CCACHE_BASEDIR keeps "
                  "each commit's build to what it changed (docs/projects.md)"),
            Guess("model", f"a GGUF file at {GGUF_MODEL} on the runner: set yours"),
        ),
    )  # fmt: skip


def _cargo(files: Snapshot) -> Shape | None:
    found = cargo_binaries(files)
    if not found:
        return None
    binary, manifest = found[0]
    others = f" (of {', '.join(b for b, _ in found)})" if len(found) > 1 else ""
    locked = " --locked" if files.has("Cargo.lock") else ""
    return Shape(
        "Cargo", f"a Cargo binary {binary} ({manifest})", binary,
        f"{{worktree}}/target/release/{binary} --port {{port}} {{flags}}",
        build=f"cargo build --release{locked}",
        guesses=(
            Guess("serve", f"the server is the binary {binary}{others} and takes --port PORT; "
                  "add its host and model options (--model {model}) if it has them"),
            Guess("ready_path", "it is ready when /health (else /v1/models) answers 200"),
        ),
    )  # fmt: skip


CARGO_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what Cargo allows a binary's name
ENTRY_POINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def cargo_binaries(files: Snapshot) -> list[tuple[str, str]]:
    """(binary, its manifest) of the root package and of the workspace's members."""
    root = _toml(files.text("Cargo.toml"))
    members = _table(root, "workspace").get("members", [])
    manifests = ["Cargo.toml"]
    for member in members if isinstance(members, list) else []:
        pattern = f"{str(member).rstrip('/')}/Cargo.toml"
        manifests += sorted(p for p in files.texts if fnmatch.fnmatch(p, pattern))
    found = []
    for manifest in manifests:
        data = _toml(files.text(manifest))
        package = str(_table(data, "package").get("name", ""))
        bins = [b.get("name") for b in data.get("bin", []) if isinstance(b, dict)]
        if (
            not any(bins)
            and package
            and files.has(_at(manifest[: -len("Cargo.toml")], "src/main.rs"))
        ):
            bins = [package]
        found += [(str(b), manifest) for b in bins if b and CARGO_NAME.fullmatch(str(b))]
    return found  # a name Cargo would refuse is never put into a command line


def _python(files: Snapshot, mentions_api: Callable[[str], bool]) -> Shape | None:
    meta = python_meta(files) or PythonMeta("", {})
    packages = sorted(
        (m.group(1) or "", m.group(2))
        for p in files.paths
        if (m := re.fullmatch(r"(src/)?([A-Za-z_]\w*)/__init__\.py", p))
    )
    packages.sort(key=lambda p: normalized(p[1]) != normalized(meta.name))  # its own first
    for src, package in packages:
        folder = src + package
        main = files.has(f"{folder}/__main__.py")
        script = next(((s, t) for s, t in sorted(meta.scripts.items())
                       if ENTRY_POINT.fullmatch(t) and t.split(":")[0].split(".")[0] == package),
                      None)  # fmt: skip
        if not (main or script) or not mentions_api(folder):
            continue
        if main:
            serve, how = f"{PYTHON} -m {package}", f"{folder}/__main__.py"
        elif script is not None:
            module, attr = script[1].split(":")
            head, _, rest = attr.partition(".")
            call = f"{head}.{rest}()" if rest else f"{attr}()"
            serve = f'{PYTHON} -c "import sys; from {module} import {head}; sys.exit({call})"'
            how = f"console script {script[0]} = {script[1]}"
        return Shape(
            "Python", f"package {package} ({how}; its source names an OpenAI endpoint)",
            meta.name or package, serve + " --port {port} {flags}", build=_install(files),
            guesses=(
                _venv_guess(files),
                Guess("serve", "it takes --port PORT; add its model option (--model {model}) "
                      "if it has one"),
                Guess("ready_path", "it is ready when /health (else /v1/models) answers 200"),
            ),
        )  # fmt: skip
    return None


def _fastapi(files: Snapshot, app: tuple[str, str] | None) -> Shape | None:
    if app is None:
        return None
    path, name = app
    src = path.startswith("src/")
    module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    folder = " --app-dir src" if src else ""
    asked = files.text("requirements.txt") + files.text("pyproject.toml")
    also = "" if "uvicorn" in asked.lower() else "uvicorn"
    return Shape(
        "FastAPI", f"a FastAPI app {name} in {path} (its package names an OpenAI endpoint)",
        _project_name(files) or module.split(".")[0],
        f"{PYTHON} -m uvicorn {module}:{name}{folder} --port {{port}} {{flags}}",
        build=_install(files, also),
        guesses=(
            _venv_guess(files, also),
            Guess("serve", f"uvicorn serves {module}:{name}; the model is the app's own "
                  "(set MODEL or its option in env or serve if it takes one)"),
            Guess("ready_path", "it is ready when /health (else /v1/models) answers 200"),
        ),
    )  # fmt: skip


PYTHON = "{worktree}/.venv/bin/python"  # the commit's own environment (VENV, then _install)


def _installs(files: Snapshot, also: str = "") -> list[tuple[str, str]]:
    """(what, pip's arguments) each commit's own virtual environment gets: what the commit asks
    for, its requirements file then the project itself (so a change to either is measured)."""
    out = [("requirements.txt", "-r requirements.txt")] if files.has("requirements.txt") else []
    if files.has("pyproject.toml") or files.has("setup.py"):
        out.append(("the project", "."))
    return out + [(also, also)] * bool(also)


def _install(files: Snapshot, also: str = "") -> str:
    steps = [f".venv/bin/pip install -q {args}" for _, args in _installs(files, also)]
    return VENV + " && ".join(steps) if steps else VENV.removesuffix(" && ")


def _venv_guess(files: Snapshot, also: str = "") -> Guess:
    what = " and ".join(w for w, _ in _installs(files, also)) or "nothing"
    return Guess("build", f"each commit gets its own .venv with {what} installed "
                 "(the runner's pip index must have its dependencies)")  # fmt: skip


def _project_name(files: Snapshot) -> str:
    meta = python_meta(files)
    return meta.name if meta else ""


def _hub_model() -> Guess:
    return Guess(
        "model",
        f"the model is {HUB_MODEL} from the Hugging Face Hub: set one your runner has "
        "(a Hub id or a local folder)",
    )


def _gauge_guess(gauge: str) -> Guess:
    return Guess(
        "device_memory",
        f"device memory comes from NVML; its KV pool's gauge {gauge} is written commented "
        "out, as its scale comes from the server's first start",
    )


def _named(files: Snapshot, folder: str, name: str) -> bool:
    meta = python_meta(files, folder)
    return meta is not None and normalized(meta.name) == name


def _at(folder: str, path: str) -> str:
    folder = folder.strip("/")
    return f"{folder}/{path}" if folder else path


def _toml(text: str) -> dict:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):  # nested past the parser's depth too
        return {}


def _table(data: dict, key: str) -> dict:
    value = data.get(key)
    return value if isinstance(value, dict) else {}
