"""Which code is serving: the engine version and the git commit of its source tree."""

import os
import subprocess
from functools import cache
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), *args], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@cache
def source_commit() -> dict:
    """{"commit": sha or "unknown", "dirty": bool}; SERVEGATE_COMMIT overrides (installs
    without a git checkout)."""
    if env := os.environ.get("SERVEGATE_COMMIT"):
        return {"commit": env, "dirty": False}
    sha = _git("rev-parse", "HEAD")
    if sha is None:
        return {"commit": "unknown", "dirty": False}
    status = _git("status", "--porcelain", "--untracked-files=no", "--", "engine")
    return {"commit": sha, "dirty": bool(status)}
