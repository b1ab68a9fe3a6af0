"""The files the harness ships and writes: the suites and templates it reads from the checkout
or from inside the installed package, and output written whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
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


def open_append(path: Path):
    """`path` opened to append text, as a regular file only: never through a link (a link
    planted in its place would send the text elsewhere) and never blocking on a FIFO or a
    device; OSError otherwise."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


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


def strict_json(obj: object, *, default=None, **options) -> str:
    """`obj` as strict JSON, which every reader parses: a non-finite number (NaN, Infinity,
    what Python's json would write bare) becomes null, as a value not measured is saved.
    `default` converts other objects as json.dumps' does; `options` are json.dumps'."""
    convert = None if default is None else (lambda o: _finite(default(o)))
    return json.dumps(_finite(obj), allow_nan=False, default=convert, **options)


def _finite(obj: object) -> object:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_regular(path: Path, size: int) -> bytes:
    """At most `size` bytes of a regular file, opened without blocking (a FIFO with no writer,
    a device or a socket would hang or never end: OSError "not a regular file")."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return f.read(size)


def read_capped(
    path: Path, limit: int, what: str, error: type[Exception], *, within: Path | None = None
) -> bytes:
    """The one door for files a user names (results, traces, datasets, cost models): a regular
    file's bytes, counted as they are read (a file's claimed size is not trusted: /proc and
    growing files lie), or `error` with one line. No FIFO, device or socket (each would hang or
    never end); with `within`, nothing whose real path (links followed) lies outside it."""
    path = Path(path)
    try:
        if within is not None and not path.resolve().is_relative_to(Path(within).resolve()):
            raise error(f"{what} {path}: a link out of {within}, not read")
        data = read_regular(path, limit + 1)
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{what} {path}: over {_size(limit)}")
    return data


def _size(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit:,} bytes"
