"""The pytest door: docs/examples/test_serving.py run by pytest (pytester) against the scripted
server passes an A/A and fails on a slower head with the gate's line; each run is also saved in
pytest-benchmark's shape, which pytest-benchmark's own storage and `compare` read; an INVALID
run raises the harness's one-line reason; the plugin imports none of the harness until used."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from pytest_benchmark import cli as benchmark_cli
from pytest_benchmark.logger import Logger
from pytest_benchmark.stats import Stats
from pytest_benchmark.storage.file import FileStorage

from harness.plugin.servegate import Servegate, ServegateError, ServegateInvalid, cli_options
from harness.report.benchmark_export import machine_id, stats

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import SUITE, write_suite

pytest_plugins = ["pytester"]

PLUGIN = "servegate_pytest"
EXAMPLE = REPO / "docs" / "examples" / "test_serving.py"
# a 50 ms scripted TTFT dwarfs a loaded CPU's noise
GATE = "[gate]\nttft_p50_ms = 0.2"
TEST = "test_head_serves_no_slower_than_base"


def plugin_args() -> list[str]:
    """`-p` the plugin unless pytest already loads it from the installed entry point."""
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]


def run_example(pytester: pytest.Pytester, monkeypatch, head_ttft_ms: int, rounds: int = 2):
    marker = unique_marker()
    pytester.makepyfile(test_serving=EXAMPLE.read_text())
    write_suite(pytester.path, SUITE.format(extra=GATE))
    monkeypatch.setenv("SERVEGATE_SUITE", "t.toml")
    monkeypatch.setenv("SERVEGATE_BASE_CMD", scripted("--ttft-ms 50 --tag a", model=marker))
    monkeypatch.setenv("SERVEGATE_HEAD_CMD", scripted(f"--ttft-ms {head_ttft_ms}", model=marker))
    # the smallest A/B: one look at `rounds` (2 by default: the A/A settles)
    args = f"--servegate-args=--rounds {rounds} --max-rounds {rounds}"
    result = pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", args)
    if starved(pytester):  # INVALID for the machine, not the example: once more
        result = pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", args)
    assert not wait_no_survivors(marker)
    return result


def starved(pytester: pytest.Pytester) -> bool:
    """Whether a loaded machine starved the example's load client (its A/B saved under the
    inner pytest's basetemp, which pytester puts beside its folder)."""
    saved = pytester.path.parent.joinpath("basetemp").glob("*/servegate-ab-*/*.json")
    return any(client_starved(json.loads(path.read_text())) for path in saved)


def test_the_example_passes_an_a_a_saved_where_pytest_benchmark_reads_it(
    pytester, monkeypatch, capsys
):
    run_example(pytester, monkeypatch, head_ttft_ms=50).assert_outcomes(passed=1)
    storage = pytester.path / ".benchmarks"
    (saved,) = (storage / machine_id()).glob("0001_servegate-*.json")
    assert saved.name == f"0001_servegate-{TEST}.json"

    loaded = list(FileStorage(storage, logger=Logger(Logger.QUIET)).load_benchmarks())
    names = {b["name"] for b in loaded}
    for arm in ("base", "head"):
        assert {f"{TEST}[{arm}-ttft_p50_ms]", f"{TEST}[{arm}-startup_s]"} <= names
    ttft = next(b for b in loaded if b["name"] == f"{TEST}[head-ttft_p50_ms]")
    assert ttft["fullname"] == f"test_serving.py::{TEST}[head-ttft_p50_ms]"
    assert ttft["group"] == f"{TEST}: ttft_p50_ms" and ttft["iterations"] == 1
    assert ttft["rounds"] == len(ttft["data"]) == 2 and all(0.04 < s < 1 for s in ttft["data"])
    # the example passed, so the gate did not say REGRESSION; PASS or INCONCLUSIVE is noise's
    assert ttft["extra_info"]["verdict"] != "REGRESSION" and ttft["extra_info"]["unit"] == "s"
    doc = json.loads(saved.read_text())
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(doc)

    capsys.readouterr()
    monkeypatch.chdir(pytester.path)
    for command in (["list"], ["compare", "--columns=min,median", "--group-by=group"]):
        monkeypatch.setattr(sys, "argv", ["pytest-benchmark", "--storage", str(storage), *command])
        benchmark_cli.main()
    out = capsys.readouterr().out
    assert str(saved) in out
    assert f"benchmark '{TEST}: ttft_p50_ms': 2 tests" in out
    assert f"{TEST}[base-ttft_p50_ms]" in out and f"{TEST}[head-ttft_p50_ms]" in out


def test_a_slower_head_fails_the_example_with_the_gate_line(pytester, monkeypatch):
    # 2x in 3 rounds: certain on a loaded machine (in 2, the t-bound on one degree of freedom
    # needs the rounds' ratios within ~4% of each other; a few ms of delay in 50 ms move it so)
    result = run_example(pytester, monkeypatch, head_ttft_ms=100, rounds=3)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*assert 'REGRESSION' != 'REGRESSION'",
            "*<REGRESSION exit 1; ttft_p50_ms REGRESSION *x CI*",
        ]
    )


def test_an_invalid_run_raises_the_harness_one_line_reason(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(extra=GATE))
    gate = Servegate(tmp_path=tmp_path, test="t", nodeid="t.py::t", cwd=tmp_path, storage=None)
    with pytest.raises(ServegateInvalid) as caught:
        gate.ab(
            suite=suite,
            rounds=2,
            base_cmd=scripted("--exit-at-start 3", model=marker),
            head_cmd=scripted("--exit-at-start 3 --tag b", model=marker),
        )
    assert not wait_no_survivors(marker)
    message = str(caught.value)
    assert message.startswith("harness ab INVALID: arm base crashed in round 1: server exited")
    assert "\n" not in message and caught.value.result.exit_code == 2


def test_an_invalid_run_of_one_arm_raises_too(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    gate = Servegate(tmp_path=tmp_path, test="t", nodeid="t.py::t", cwd=tmp_path, storage=None)
    failing = scripted("--fail-every 1", model=marker)  # every request an HTTP 500
    with pytest.raises(ServegateInvalid) as caught:
        gate.run(suite=suite, serve_cmd=failing)
    assert not wait_no_survivors(marker)
    said = "harness run INVALID: run 1: phase 'load': all 6 requests failed"
    assert str(caught.value).startswith(said)
    assert "\n" not in str(caught.value) and caught.value.result.verdict == "INVALID"
    kept = gate.run(suite=suite, serve_cmd=failing, check=False)
    assert kept.verdict == "INVALID" and not wait_no_survivors(marker)
    with pytest.raises(ServegateError, match="writes into the test's tmp_path: no out="):
        gate.run(suite=suite, out="x.json")


def test_a_run_returns_each_metric_per_run_and_saves_them(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    storage = tmp_path / "bench"
    gate = Servegate(tmp_path=tmp_path, test="t", nodeid="t.py::t", cwd=tmp_path, storage=storage)
    cmd = scripted("--ttft-ms 50", model=marker)
    result = gate.run(suite=suite, serve_cmd=cmd, check=False)
    if client_starved(json.loads(result.json.read_text())):  # the machine's: once more
        result = gate.run(suite=suite, serve_cmd=cmd, check=False)
    assert not wait_no_survivors(marker)
    assert result.verdict == "VALID" and result.exit_code == 0
    assert len(result["ttft_p50_ms"]) == 1 and 50 < result.value("ttft_p50_ms") < 200
    assert result.benchmark_json == storage / machine_id() / "0001_servegate-t.json"
    names = [b["name"] for b in json.loads(result.benchmark_json.read_text())["benchmarks"]]
    assert "t[run-ttft_p50_ms]" in names and "t[run-tok_s]" not in names


def test_stats_are_pytest_benchmarks_own():
    rng = random.Random(1)
    for n in range(1, 12):
        data = [rng.lognormvariate(-3, 0.3) for _ in range(n)]
        theirs = Stats()
        for x in data:
            theirs.update(x)
        ours = stats(data)
        assert ours.pop("data") == data and ours.pop("iterations") == 1
        assert ours == pytest.approx(theirs.as_dict())


def test_keyword_options_are_the_clis():
    options = dict(base_cmd="a --x {port}", rounds=3, null_arm=True, quiet=False, model=None)
    options |= {"suite": Path("s.toml"), "metric": ["ttft_p50_ms", "tpot_ms"]}
    assert cli_options(options) == [
        "--base-cmd=a --x {port}", "--rounds=3", "--null-arm", "--suite=s.toml",
        "--metric=ttft_p50_ms", "--metric=tpot_ms",
    ]  # fmt: skip


def test_the_plugin_imports_none_of_the_harness_until_a_test_asks():
    code = (
        f"import sys, {PLUGIN}; "
        "print(sorted(m for m in sys.modules if m.startswith(('harness', 'numpy', 'click'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # not even the harness package


def test_a_repository_with_its_own_harness_package_runs_its_tests(tmp_path):
    # pytest loads servegate's plugin in every session; a repository whose own top-level
    # package is `harness` shadows ours, so the plugin must not live (or import) there
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("NAME = 'theirs'\n")
    (tmp_path / "test_theirs.py").write_text(
        "import harness\n\n\ndef test_it():\n    assert harness.NAME == 'theirs'\n"
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
           "test_theirs.py"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    helped = subprocess.run([*cmd[:-1], "--help"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert "--servegate-args" in helped.stdout  # the plugin loaded beside their package
