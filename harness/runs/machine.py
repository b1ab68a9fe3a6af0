"""Facts about the machine a run happened on: CPU model, cores, memory, load, platform."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import psutil


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True
            )
            return out.stdout.strip() or platform.processor()
        except OSError:
            pass
    return platform.processor() or platform.machine()


SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16",
              "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")  # fmt: skip


@functools.cache
def cpu_flags() -> list[str]:
    """The CPU's vector-extension flags that decide an engine's fast paths (x86 and ARM)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return []
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if line.startswith(("flags", "Features")):
            have = set(line.split(":", 1)[1].split())
            return [f for f in SIMD_FLAGS if f in have]
    return []


@functools.cache
def gpus() -> list[str]:
    """Each NVIDIA GPU with its driver (`nvidia-smi`), or Apple silicon's GPU; [] if none."""
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return [f"Apple {cpu_model()} GPU (Metal)"]
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [line.split(", ") for line in out.stdout.splitlines() if line.count(", ") == 2]
    return [f"{name} ({mem}), driver {driver}" for name, mem, driver in rows]


def machine_facts() -> dict:
    """A snapshot taken at the start of a run (the load average says how busy the box was)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "gpus": gpus(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": psutil.virtual_memory().total,
        "load_average": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def git_commit(cwd: Path) -> str | None:
    """The commit checked out at `cwd`, with `+dirty` when the tree has changes."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, timeout=5,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("+dirty" if dirty else "")) if sha else None


def harness_version() -> str:
    try:
        return importlib.metadata.version("servegate")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
