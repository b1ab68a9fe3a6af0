"""The `engine` command's entry point: the reference engine needs its own dependencies
(`servegate[engine]`); a harness-only install says so in one line instead of a traceback."""

import sys

INSTALL = "pip install 'servegate[engine]' (torch, mlx, tokenizers, gguf, safetensors)"


def main() -> None:
    try:
        from engine.cli import main as cli
    except ImportError as exc:
        missing = exc.name or str(exc)
        print(f"engine: the reference engine needs {missing}, which is not installed: {INSTALL}",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    cli()
