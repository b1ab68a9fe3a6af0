"""A background thread that samples the RSS of the server's whole process tree (and its GPU
memory through NVML when importable) into a timeline with phase marks."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil

TREE_REFRESH_S = 0.25  # walking /proc for children is costly; the tree rarely changes


@dataclass(slots=True)
class Timeline:
    t: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    gpu: list[int] = field(default_factory=list)  # empty unless NVML is available
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


class Sampler:
    """Samples at `hz` (>= 50) on its own thread so a busy event loop cannot delay it.
    Times are seconds since `t0` on the perf_counter clock, the clock the load records use."""

    def __init__(self, pid: int, t0: float, hz: float = 100.0) -> None:
        self.root = psutil.Process(pid)
        self.t0, self.period = t0, 1.0 / max(hz, 50.0)
        self.timeline = Timeline()
        self.seen: dict[int, psutil.Process] = {pid: self.root}
        self._procs: list[psutil.Process] = [self.root]
        self._refreshed = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._nvml = _Nvml.open()

    @property
    def hz(self) -> float:
        return 1.0 / self.period

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> Timeline:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        return self.timeline

    def mark(self, phase: str) -> float:
        t = time.perf_counter() - self.t0
        self.timeline.marks.append((t, phase))
        return t

    def tree(self) -> list[psutil.Process]:
        """The live processes of the server's tree as of the last refresh."""
        return list(self._procs)

    def sample(self) -> None:
        now = time.perf_counter()
        if now - self._refreshed > TREE_REFRESH_S:
            self._refresh()
            self._refreshed = now
        total = 0
        for proc in self._procs:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        if total:
            self.timeline.t.append(round(now - self.t0, 4))
            self.timeline.rss.append(total)
            if self._nvml:
                self.timeline.gpu.append(self._nvml.used_by({p.pid for p in self._procs}))

    def _refresh(self) -> None:
        try:
            kids = self.root.children(recursive=True)
        except psutil.Error:
            kids = []
        self._procs = [self.root, *kids]
        self.seen.update((p.pid, p) for p in kids)

    def _run(self) -> None:
        deadline = time.perf_counter()
        while not self._stop.is_set():
            self.sample()
            deadline += self.period
            delay = deadline - time.perf_counter()
            if delay < 0:  # fell behind (a loaded machine): resynchronize, do not burst
                deadline, delay = time.perf_counter(), 0.0
            self._stop.wait(delay)


class _Nvml:
    """Per-process GPU memory through pynvml (nvidia-ml-py), when it imports and finds a GPU."""

    def __init__(self, nvml, handles: list) -> None:
        self.nvml, self.handles = nvml, handles

    @classmethod
    def open(cls) -> _Nvml | None:
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            return cls(pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)])
        except Exception:  # not installed, no driver, no device: GPU sampling is skipped
            return None

    def used_by(self, pids: set[int]) -> int:
        total = 0
        for handle in self.handles:
            try:
                procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception:
                continue
            total += sum(p.usedGpuMemory or 0 for p in procs if p.pid in pids)
        return total
