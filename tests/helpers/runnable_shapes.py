"""Throwaway repositories shaped like vLLM, SGLang, TGI and a FastAPI server that also build and
serve, so that what `harness init` writes for them can run: each commits the scripted server
(tests/helpers/scripted_server.py) behind the command line its shape's server has (`vllm serve
MODEL --port P`, `python -m sglang.launch_server --model-path M --port P --enable-metrics`,
`text-generation-launcher --model-id M --port P`), or the FastAPI app of fastapi_app.py, with
the manifests init reads. TGI's Rust build is stood in for by `cargo` from `fake_cargo`, which
copies the committed launcher into target/release/."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import SCRIPTED_SERVER
from helpers.adopt_repos import FASTAPI_APP

TIMINGS = ["--ttft-ms", "30", "--itl-ms", "4"]
LAUNCH = '''\
import os, sys

def main(argv=None):
    """{doc}: the scripted server, given the port and the model."""
    args, model, port, flags = list(sys.argv[1:] if argv is None else argv), "m", "0", []
    while args:
        a = args.pop(0)
        if a in {model_opts}:
            model = args.pop(0)
        elif a == "--port":
            port = args.pop(0)
        elif a not in {ignored}:
            flags.append(a)
    here = os.path.dirname(os.path.abspath(__file__))
    server = os.path.join(here, "_scripted.py")
    os.execv(sys.executable, [sys.executable, server, "--port", port, "--model", model,
                              *{timings!r}, *flags])

if __name__ == "__main__":
    main()
'''


def launcher(doc: str, model_opts: tuple[str, ...], ignored: tuple[str, ...] = ()) -> str:
    return LAUNCH.format(doc=doc, model_opts=repr(tuple(model_opts)), ignored=repr(tuple(ignored)),
                         timings=TIMINGS)  # fmt: skip


def shapes() -> dict[str, dict[str, str]]:
    scripted = SCRIPTED_SERVER.read_text()
    return {
        "vllm": {
            "pyproject.toml": '[project]\nname = "vllm"\nversion = "0"\ndependencies = '
            '["aiohttp"]\n\n[project.scripts]\nvllm = "vllm.entrypoints.cli.main:main"\n',
            "vllm/__init__.py": "",
            "vllm/_scripted.py": scripted,
            "vllm/entrypoints/__init__.py": "",
            "vllm/entrypoints/openai/__init__.py": "",
            "vllm/entrypoints/openai/api_server.py": '@router.post("/v1/chat/completions")\n',
            "vllm/entrypoints/cli/__init__.py": "",
            "vllm/entrypoints/cli/main.py": launcher("vllm serve MODEL", ("serve",)).replace(
                "here = os.path.dirname(os.path.abspath(__file__))",
                "here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath("
                "__file__))))",
            ),
        },
        "sglang": {
            "python/pyproject.toml": '[project]\nname = "sglang"\nversion = "0"\ndependencies = '
            '["aiohttp"]\n\n[project.optional-dependencies]\nall = []\n',
            "python/sglang/__init__.py": "",
            "python/sglang/_scripted.py": scripted,
            "python/sglang/launch_server.py": launcher(
                "python -m sglang.launch_server", ("--model-path",), ("--enable-metrics",)
            ),
        },
        "tgi": {
            "Cargo.toml": '[workspace]\nmembers = ["launcher", "router"]\n',
            "launcher/Cargo.toml": '[package]\nname = "text-generation-launcher"\n',
            "router/Cargo.toml": '[package]\nname = "text-generation-router-v3"\n',
            "launcher/_scripted.py": scripted,
            "launcher/text-generation-launcher": launcher(
                "text-generation-launcher", ("--model-id",)
            ),  # fmt: skip
        },
        "fastapi": {
            "requirements.txt": "fastapi\nuvicorn\n",
            "app/__init__.py": "",
            "app/main.py": FASTAPI_APP.read_text(),
        },
    }


def fake_cargo(bin_dir: Path) -> Path:
    """`cargo` that `cargo build --release` of the TGI shape needs: the launcher and the scripted
    server it runs copied into target/release/, on this Python (the runner's, as TGI's shards)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cargo = bin_dir / "cargo"
    cargo.write_text(
        "#!/bin/sh\nset -e\n[ \"$1 $2\" = 'build --release' ] || exit 2\n"
        "mkdir -p target/release\ncp launcher/_scripted.py target/release/\n"
        f"{{ echo '#!{sys.executable}'; cat launcher/text-generation-launcher; }} "
        ">target/release/text-generation-launcher\n"
        "chmod +x target/release/text-generation-launcher\n"
    )
    cargo.chmod(0o755)
    return bin_dir
