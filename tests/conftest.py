"""Fixtures shared by the tests: a running tiny engine with chosen flags. The tests live by what
they exercise: engine/ the reference engine's, harness/<stage>/ each harness stage's (harness/
itself: the whole package's). The modules they share are the package helpers/ (tests/ is on
pytest's path: pyproject's `pythonpath`)."""

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
