"""The `engine` command's entry point: the reference engine needs its own dependencies
(the `engine` extra); a harness-only install says so in one line instead of a traceback."""

import sys

INSTALL = (  # as docs/projects.md says: from the repository or a checkout, no package index
    "install the engine extra: pip install '.[engine]' in a servegate checkout, or "
    'pip install "servegate[engine] @ git+https://github.com/servegate/servegate"'
)


def main() -> None:
    try:
        from engine.cli import main as cli
    except ImportError as exc:
        missing = exc.name or str(exc)
        print(f"engine: the reference engine needs {missing}, which is not installed; {INSTALL}",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    cli()
