"""Device memory through NVML, per device and over the server's whole life: the probe's
arithmetic against a stand-in for pynvml (no GPU here), and the timeline reading it back."""

from __future__ import annotations

from types import SimpleNamespace

from harness.load.memory_timeline import Sampler, Timeline
from harness.load.rss_probe import Nvml, sample_gpu


class FakeNvml:
    """Two devices; the server's tree (pids 10, 11) holds memory on both, another process too."""

    def __init__(self):
        self.procs = {
            "gpu0": [SimpleNamespace(pid=10, usedGpuMemory=3 << 30),
                     SimpleNamespace(pid=99, usedGpuMemory=7 << 30)],
            "gpu1": [SimpleNamespace(pid=11, usedGpuMemory=1 << 30),
                     SimpleNamespace(pid=10, usedGpuMemory=None)],
        }  # fmt: skip

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802 - pynvml's name
        return self.procs[handle]


def test_nvml_counts_the_trees_processes_per_device():
    nvml = Nvml(FakeNvml(), ["gpu0", "gpu1"])
    assert nvml.used_by({10, 11}) == [3 << 30, 1 << 30]  # pid 99 is not the server's
    assert sample_gpu(nvml.used_by({10, 11})) == f" {4 << 30} {3 << 30},{1 << 30}"


def test_the_timeline_keeps_the_whole_lifes_peak_per_device(tmp_path):
    sampler = Sampler.__new__(Sampler)
    sampler.t0, sampler._timeline, sampler.seen = 0.0, Timeline(), {}
    for line in ("1.0 100 5 2,3", "2.0 100 9 8,1", "3.0 100 6 1,5"):
        sampler._take(line.split())
    assert sampler._timeline.device_peaks() == {
        "peak_bytes": 9, "per_device_peak_bytes": [8, 5], "source": "nvml"}  # fmt: skip
    assert Timeline().device_peaks() is None  # no NVML: no figure, not a zero
