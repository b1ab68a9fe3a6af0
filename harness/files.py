"""The files the harness ships and writes: the suites and templates it reads from the checkout
or from inside the installed package, and output written whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

_SOURCE_TREE = Path(__file__).resolve().parents[1]
_PACKAGED = Path(__file__).resolve().parent / "_data"


def shipped_dir(name: str) -> Path:
    """`suites` or `templates`: the repository's folder in a source checkout (or an editable
    install), else the copy a wheel carries inside the package (setup.py maps it there)."""
    source = _SOURCE_TREE / name
    in_checkout = (_SOURCE_TREE / "pyproject.toml").is_file() and source.is_dir()
    return source if in_checkout else _PACKAGED / name


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text, or bytes as they are) to a temporary name beside `path`, then
    rename: a full disk or an interrupt leaves the old file or none, never a truncated one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~_umask())  # as open() would have made it, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_capped(path: Path, limit: int, what: str, error: type[Exception]) -> bytes:
    """A file's bytes (a trace, a dataset), or `error` with one line: past `limit`, or when it
    cannot be read."""
    path = Path(path)
    try:
        if path.stat().st_size > limit:
            raise error(f"{path}: over {limit // 2**20} MiB")
        return path.read_bytes()
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror or exc}") from None
