"""Files the harness reads that are damaged, hand-edited or hostile: a saved result whose gated
values are not finite positive numbers, one larger than the stated cap, a `created` date or a
suite name that would write outside the output folder. Each is one line and exit 2, or is
written where it belongs."""

from __future__ import annotations

import json

import pytest
from test_exit_codes import SUITE, cli, one_line_error

import harness.report.saved as saved

from fake_runs import make_run

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
    monkeypatch.setattr(saved, "MAX_INPUT_BYTES", 100)
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
