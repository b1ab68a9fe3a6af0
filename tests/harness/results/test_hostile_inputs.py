"""Files the harness reads that are damaged, hand-edited or hostile: a saved result whose gated
values are not finite positive numbers, one larger than the stated cap, a `created` date or a
suite name that would write outside the output folder. Each is one line and exit 2, or is
written where it belongs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import harness.results.store as store

from helpers.cli import cli, one_line_error
from helpers.fake_runs import make_run
from helpers.suites import SUITE

GOOD = {"ttft_p50_ms": 20.0, "ttft_p95_ms": 25.0, "tok_s": 100.0, "peak_rss_bytes": 2.0e8}


def runs_file(tmp_path, name: str, **changes) -> str:
    path = tmp_path / name
    runs = [make_run(GOOD | changes) for _ in range(3)]
    path.write_text(json.dumps({"runs": runs}, allow_nan=True))
    return str(path)


@pytest.mark.parametrize(
    "bad",
    [None, float("nan"), 0.0, -5.0, float("inf"), "20", True],
    ids=["null", "nan", "zero", "negative", "inf", "string", "bool"],
)
def test_a_saved_result_with_unusable_values_is_refused(tmp_path, bad):
    a = runs_file(tmp_path, "a.json")
    b = runs_file(tmp_path, "b.json", ttft_p50_ms=bad)
    one_line_error(cli("compare", a, b, cwd=tmp_path), "run 1's ttft_p50_ms is")
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").glob("*.md"))


def test_a_missing_memory_peak_is_not_measured_not_damaged(tmp_path):
    a = runs_file(tmp_path, "a.json", peak_rss_bytes=None)
    out = cli("compare", a, runs_file(tmp_path, "b.json", peak_rss_bytes=None), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_input_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "MAX_INPUT_BYTES", 100)
    a, b = runs_file(tmp_path, "a.json"), runs_file(tmp_path, "b.json")
    one_line_error(cli("compare", a, b, cwd=tmp_path), "a saved result may have")


def test_a_created_date_cannot_move_the_report_out_of_its_folder(tmp_path):
    a, b = runs_file(tmp_path, "a.json"), runs_file(tmp_path, "b.json")
    out = tmp_path / "out"
    assert cli("compare", a, b, "--out-dir", str(out), cwd=tmp_path).returncode == 0
    (saved_json,) = out.glob("*.json")
    doc = json.loads(saved_json.read_text())
    doc["created"] = "../../../escaped"
    saved_json.write_text(json.dumps(doc))
    again = tmp_path / "again" / "deep"
    r = cli("report", str(saved_json), "--out-dir", str(again), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not list(tmp_path.glob("escaped*")) and not list((tmp_path / "again").glob("*.md"))
    assert len(list(again.glob("*.md"))) == 1


def test_a_suite_name_that_would_name_a_path_is_refused(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text('name = "../../../../elsewhere/x"\n' + SUITE.format(extra=""))
    one_line_error(cli("run", "--suite", str(suite), "--serve-cmd", "x {port}", cwd=tmp_path),
                   "must be letters, digits")  # fmt: skip


RATE = 'model = "m"\n[[phase]]\nname = "p"\narrival = "rate"\n'


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ab", "--ready-timeout", "nan"], "must be a finite number of seconds > 0"),
        (["ab", "--ready-timeout", "-1"], "must be a finite number of seconds > 0"),
        (["run", "--suite", "smoke", "--ready-timeout", "inf"], "finite number of seconds"),
        (["ab", "--rounds", "5", "--max-rounds", "3"], "3 is below --rounds 5"),
        (["bisect", "--good", "HEAD~1", "--rounds", "5", "--max-rounds", "3"], "below --rounds"),
        (["sweep", "--levels", "", "--serve-cmd", "x {port}"], "give at least one level"),
        (["sweep", "--slo", "ttft_p95_ms=-5", "--serve-cmd", "x {port}"], "finite and > 0"),
        (["sweep", "--slo", "requests=5", "--serve-cmd", "x {port}"], "METRIC one of"),
        (["sweep", "--slo", "ttft_p95_ms=nan", "--serve-cmd", "x {port}"], "finite and > 0"),
        (["sweep", "--knee-gain", "nan", "--serve-cmd", "x {port}"], "finite fraction"),
    ],
)  # fmt: skip
def test_numeric_options_are_checked_before_anything_starts(tmp_path, args, needle):
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert needle in out.stderr, out.stderr
    assert not (tmp_path / "results" / "logs").exists()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (RATE + "rate = inf\n", "finite rate > 0"),
        (RATE + "rate = nan\n", "finite rate > 0"),
        ('model = "m"\n[[phase]]\nname = "p"\ntemperature = nan\n', "temperature must be"),
        ('model = "m"\n[[phase]]\nname = "p"\nmax_error_rate = nan\n', "max_error_rate"),
        ('model = "m"\n[[phase]]\nname = "p"\n[gate]\nttft_p50_ms = inf\n', "gate.ttft_p50_ms"),
        ('model = "m"\n[[phase]]\nname = "p"\n[gate]\ntok_s = nan\n', "gate.tok_s"),
        ('model = "m"\n[[phase]]\nname = "p"\n[gate]\nmemory_slack_mib = nan\n', "memory_slack"),
        ('model = "m"\n[[phase]]\nname = "p"\nprompt_tokens = {dist = "normal", mean = nan, '
         'std = 1, max = 9}\n', "mean and std must be finite"),
    ],
)  # fmt: skip
def test_suite_values_that_are_not_finite_are_refused(tmp_path, text, needle):
    suite = tmp_path / "s.toml"
    suite.write_text(text)
    one_line_error(cli("run", "--suite", str(suite), "--serve-cmd", "x {port}", cwd=tmp_path),
                   needle)  # fmt: skip


def test_a_closed_pipe_is_not_an_error(tmp_path):
    pipe = f"{sys.executable} -m harness suites | head -1; exit ${{PIPESTATUS[0]}}"
    r = subprocess.run(pipe, shell=True, executable="/bin/bash", capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
