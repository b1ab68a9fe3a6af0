"""Fixtures shared by the tests: a running tiny engine with chosen flags. The tests live by what
they exercise: engine/ the reference engine's, harness/<stage>/ each harness stage's (harness/
itself: the whole package's). The modules they share are the package helpers/ (tests/ is on
pytest's path: pyproject's `pythonpath`).

Under pytest-xdist (`-n auto`) a test marked `timing` runs alone: it judges real timings, which
another worker's test on the same cores can flip. Every test holds a shared lock on one file;
a `timing` test holds it exclusively, and a turnstile lock keeps new tests out while it waits.

A test in a module that reads a clock or starts a server is marked `clock` here, by that rule
(never by hand): scripts/stress-tests.sh runs those and the `timing` ones beside a busy process
on every core, where each must still pass (docs/testing.md)."""

import fcntl
import re
import tempfile
from pathlib import Path

import pytest

from helpers.engine_server import EngineProcess


@pytest.fixture
def engine_factory(tmp_path):
    started = []

    def start(*flags: str, model: str = "tiny") -> EngineProcess:
        proc = EngineProcess(*flags, model=model, log=tmp_path / f"engine{len(started)}.log")
        started.append(proc)
        return proc.wait_ready()

    yield start
    for proc in started:
        proc.stop()


READS_REAL_TIME = re.compile(
    r"perf_counter|monotonic\(|time\.time\(|time\.sleep\(|asyncio\.sleep\("  # a clock
    r"|\bharness\(|start_harness\(|harness_sweep\(|engine_factory|EngineProcess|scripted\("
    r"|servegate\.(ab|run|sweep)\(|GpuRepo\(|ProjectRepo\("  # a server, on real time
)


def pytest_collection_modifyitems(items):
    reads: dict[Path, bool] = {}
    for item in items:
        path = Path(item.fspath)
        if path not in reads:
            reads[path] = bool(READS_REAL_TIME.search(path.read_text()))
        if reads[path]:
            item.add_marker(pytest.mark.clock)


def _lock_dir(config) -> Path | None:
    """The workers' shared folder (named by the run's id), or None outside an xdist worker (a
    pytest that a test starts inherits the worker's environment, not its config)."""
    worker = getattr(config, "workerinput", None)
    if worker is None:
        return None
    path = Path(tempfile.gettempdir()) / f"servegate-tests-{worker['testrunuid']}"
    path.mkdir(exist_ok=True)
    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's whole protocol (its module's fixtures' setup and teardown included) under the
    lock: shared, or exclusive for a `timing` test."""
    folder = _lock_dir(item.config)
    if folder is None:
        return (yield)
    alone = item.get_closest_marker("timing") is not None
    with open(folder / "turnstile", "a") as gate, open(folder / "tests", "a") as tests:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(tests, fcntl.LOCK_EX)  # waits for running tests; new ones wait at the gate
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(tests, fcntl.LOCK_SH)
        try:
            return (yield)
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
