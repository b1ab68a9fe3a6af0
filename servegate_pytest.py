"""servegate's pytest plugin (entry point `pytest11: servegate`): the `servegate` fixture, whose
`ab(...)` and `run(...)` run the harness for a test (harness/plugin/servegate.py), and the
options that say where their results also go in pytest-benchmark's shape and what every run
adds. pytest loads it into every session where servegate is installed, in every repository:
so it is a top-level module of its own name (a repository's own `harness` package cannot
shadow it) and imports none of the harness until a test asks."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("servegate", "servegate: A/B gates of LLM servers as tests")
    group.addoption(
        "--servegate-benchmark-storage",
        metavar="PATH",
        default=".benchmarks",
        help="Where each servegate fixture run is also saved in pytest-benchmark's shape "
        "(PATH/<machine-id>/NNNN_servegate-<test>.json, read by `pytest-benchmark compare` "
        "with the same --storage), relative to where pytest started; '' saves none. "
        "[default: .benchmarks, as --benchmark-storage]",
    )

    group.addoption(
        "--servegate-args",
        metavar="ARGS",
        default="",
        help="Options added to every servegate fixture run, before the test's own (which win): "
        "e.g. '--budget-minutes 20' in CI.",
    )


@pytest.fixture
def servegate(request: pytest.FixtureRequest, tmp_path: Path):
    """Run `harness ab` / `harness run` for this test: `servegate.ab(base_cmd=..., head_cmd=...,
    suite=...)` returns the gate's result (`.verdict`, `.exit_code`, `.metrics`, `.report`)."""
    from harness.plugin.servegate import Servegate

    config = request.config
    storage = config.getoption("servegate_benchmark_storage").removeprefix("file://")
    return Servegate(
        tmp_path=tmp_path,
        test=request.node.name,
        nodeid=request.node.nodeid,
        cwd=config.rootpath,
        storage=config.invocation_params.dir / storage if storage else None,
        defaults=shlex.split(config.getoption("servegate_args")),
    )
