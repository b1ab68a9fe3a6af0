"""The sampling loop of harness/load/memory_timeline.py, run as its own process (`python -m
harness.load.rss_probe PID HZ FILE`) so that the harness's busy event loop cannot delay it through
the GIL: each tick appends `time rss [gpu per-device]` (perf_counter seconds, bytes; the GPU figures
through NVML, summed over the tree, in all and per device as `d0,d1`) to FILE, and each
process that joins the server's tree a `+ pid create_time` line. It stops when its parent or
the server is gone, or on SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import psutil

TREE_REFRESH_S = 0.25  # walking /proc for children is costly; the tree rarely changes


class Nvml:
    """Per-process GPU memory through pynvml (nvidia-ml-py), when it imports and finds a GPU."""

    def __init__(self, nvml, handles: list) -> None:
        self.nvml, self.handles = nvml, handles

    @classmethod
    def open(cls) -> Nvml | None:
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            return cls(pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)])
        except Exception:  # not installed, no driver, no device: GPU sampling is skipped
            return None

    def used_by(self, pids: set[int]) -> list[int]:
        """Bytes the processes `pids` hold on each device (0 where they hold none)."""
        used = []
        for handle in self.handles:
            try:
                procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception:
                procs = []
            used.append(sum(p.usedGpuMemory or 0 for p in procs if p.pid in pids))
        return used


def probe(pid: int, hz: float, path: str) -> None:
    root, parent = psutil.Process(pid), os.getppid()
    procs: dict[int, psutil.Process] = {pid: root}
    nvml = Nvml.open()
    period, refreshed = 1.0 / hz, 0.0
    with open(path, "a", buffering=1) as out:
        out.write(f"+ {pid} {root.create_time()}\n")
        deadline = time.perf_counter()
        while os.getppid() == parent:
            now = time.perf_counter()
            if now - refreshed > TREE_REFRESH_S:
                if not root.is_running():
                    return
                _refresh(root, procs, out)
                refreshed = now
            total = 0
            for proc in list(procs.values()):
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    del procs[proc.pid]
            if total:
                gpu = sample_gpu(nvml.used_by(set(procs))) if nvml else ""
                out.write(f"{now:.6f} {total}{gpu}\n")
            deadline += period
            delay = deadline - time.perf_counter()
            if delay < 0:  # fell behind (a loaded machine): resynchronize, do not burst
                deadline, delay = time.perf_counter(), 0.0
            time.sleep(delay)


def sample_gpu(per_device: list[int]) -> str:
    """` TOTAL D0,D1,...`: the tree's device bytes in all, then per device."""
    return f" {sum(per_device)} {','.join(map(str, per_device))}"


def _refresh(root: psutil.Process, procs: dict[int, psutil.Process], out) -> None:
    try:
        kids = root.children(recursive=True)
    except psutil.Error:
        return
    for kid in kids:
        if kid.pid not in procs:
            procs[kid.pid] = kid
            try:
                out.write(f"+ {kid.pid} {kid.create_time()}\n")
            except psutil.Error:
                continue


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    pid, hz, path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    with contextlib.suppress(psutil.Error, KeyboardInterrupt):
        probe(pid, hz, path)


if __name__ == "__main__":
    main()
