"""RSS of the server's whole process tree (and its GPU memory through NVML when importable)
sampled into a timeline with phase marks. The sampling runs in its own process
(harness/load/rss_probe.py): on a loaded machine a thread beside the load driver's event loop
fell to ~30 Hz waiting for the GIL. The achieved rate and the longest gap are recorded."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import psutil

START_TIMEOUT_S = 30.0
PROBE = "harness.load.rss_probe"  # run as `python -m PROBE` from the repo root
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(slots=True)
class Timeline:
    t: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    gpu: list[int] = field(default_factory=list)  # empty unless NVML is available
    gpu_devices: list[list[int]] = field(default_factory=list)  # the same, per device
    marks: list[tuple[float, str]] = field(default_factory=list)

    def window_max(self, start: float, end: float, series: str = "rss") -> int | None:
        values = getattr(self, series)
        inside = [v for t, v in zip(self.t, values, strict=False) if start <= t <= end]
        return max(inside) if inside else None

    def as_dict(self) -> dict:
        out = {"t": self.t, "rss": self.rss, "marks": [list(m) for m in self.marks]}
        if self.gpu:
            out["gpu"] = self.gpu
        return out

    def device_peaks(self) -> dict | None:
        """The server's device memory over its whole life (load included): the peak of the sum
        over devices, and each device's own peak. None without NVML."""
        if not self.gpu:
            return None
        per = [max(col) for col in zip(*self.gpu_devices, strict=False)] if self.gpu_devices else []
        return {"peak_bytes": max(self.gpu), "per_device_peak_bytes": per, "source": "nvml"}

    def achieved(self) -> dict:
        """The rate the samples came at, and the longest gap between two of them."""
        if len(self.t) < 2:
            return {"achieved_hz": None, "max_gap_s": None}
        gaps = [b - a for a, b in zip(self.t, self.t[1:], strict=False)]
        span = self.t[-1] - self.t[0]
        return {
            "achieved_hz": round((len(self.t) - 1) / span, 1) if span > 0 else None,
            "max_gap_s": round(max(gaps), 4),
        }


class Sampler:
    """Samples at `hz` (>= 50) in a probe process. Times are seconds since `t0` on the
    perf_counter clock (CLOCK_MONOTONIC, shared by every process), the load records' clock."""

    def __init__(self, pid: int, t0: float, hz: float = 100.0) -> None:
        self.root = psutil.Process(pid)
        self.pid, self.t0, self.period = pid, t0, 1.0 / max(hz, 50.0)
        self.seen: dict[int, psutil.Process] = {pid: self.root}
        self._timeline = Timeline()
        fd, self._path = tempfile.mkstemp(prefix="servegate-rss-", suffix=".txt")
        os.close(fd)
        self._read_at = 0
        self._probe: subprocess.Popen | None = None

    @property
    def hz(self) -> float:
        return 1.0 / self.period

    @property
    def timeline(self) -> Timeline:
        """The samples so far (read from the probe's file up to its last complete line)."""
        with open(self._path, "rb") as f:
            f.seek(self._read_at)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._read_at += end
        for line in data[:end].decode().splitlines():
            self._take(line.split())
        return self._timeline

    def start(self) -> Sampler:
        cmd = [sys.executable, "-m", PROBE, str(self.pid), str(self.hz), self._path]
        self._probe = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S  # the first sample, or the probe's end
        while not self.timeline.t and self._probe.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def stop(self) -> Timeline:
        if self._probe is not None:
            self._probe.terminate()
            try:
                self._probe.wait(5.0)
            except subprocess.TimeoutExpired:
                self._probe.kill()
                self._probe.wait()
        timeline = self.timeline
        os.unlink(self._path)
        self._path = os.devnull
        self._read_at = 0
        return timeline

    def mark(self, phase: str) -> float:
        t = time.perf_counter() - self.t0
        self._timeline.marks.append((t, phase))
        return t

    def tree(self) -> list[psutil.Process]:
        """The live processes of the server's tree, now."""
        try:
            kids = self.root.children(recursive=True)
        except psutil.Error:
            kids = []
        self.seen.update((p.pid, p) for p in kids)
        return [p for p in [self.root, *kids] if p.is_running()]

    def _take(self, fields: list[str]) -> None:
        if fields[0] == "+":  # a process joined the tree
            pid, created = int(fields[1]), float(fields[2])
            try:
                proc = psutil.Process(pid)
                if abs(proc.create_time() - created) < 0.01 and pid not in self.seen:
                    self.seen[pid] = proc
            except psutil.Error:
                pass
            return
        tl = self._timeline
        tl.t.append(round(float(fields[0]) - self.t0, 4))
        tl.rss.append(int(fields[1]))
        if len(fields) > 2:
            tl.gpu.append(int(fields[2]))
        if len(fields) > 3:
            tl.gpu_devices.append([int(x) for x in fields[3].split(",")])
