"""servegate's harness: build arms, fire load, sample memory, and gate head against base."""

from pathlib import Path

_SOURCE_TREE = Path(__file__).resolve().parents[1]
_PACKAGED = Path(__file__).resolve().parent / "_data"


def shipped_dir(name: str) -> Path:
    """`suites` or `templates`: the repository's folder in a source checkout (or an editable
    install), else the copy a wheel carries inside the package (setup.py maps it there)."""
    source = _SOURCE_TREE / name
    in_checkout = (_SOURCE_TREE / "pyproject.toml").is_file() and source.is_dir()
    return source if in_checkout else _PACKAGED / name
