"""The exit-code contract on bad input: every verb, a matrix of mistakes a user makes, each one
line on stderr naming the problem and exit 2 (never a traceback, whose exit 1 means regression).
A server whose streams fail or send garbage makes the run INVALID (exit 2), not a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli.outputs import writable_file

from helpers.arms import scripted
from helpers.cli import cli, harness, one_line_error
from helpers.fake_runs import make_run
from helpers.processes import unique_marker
from helpers.suites import SUITE, write_suite

PHASE_HEAD = 'model = "scripted"\n[[phase]]\nname = "p"\n'


def verb_args(verb: str, suite: Path, cmd: str) -> list[str]:
    """The verb run with two command arms, so no git and no engine is needed."""
    if verb == "run":
        return ["run", "--quiet", "--suite", str(suite), "--serve-cmd", cmd]
    return ["ab", "--quiet", "--suite", str(suite), "--base-cmd", cmd, "--head-cmd", cmd]


BAD_SUITES = [
    ('model = "scripted"\ngate = 5\n[[phase]]\nname = "p"\n', "gate must be a table, got 5"),
    ('model = "scripted"\ngate = "abc"\n[[phase]]\nname = "p"\n', "gate must be a table"),
    (PHASE_HEAD + "expect = 5\n", "phase 'p': expect must be a table, got 5"),
    (PHASE_HEAD + 'prompt_tokens = {dist = "choice", choices = 5}\n', "choices must be an array"),
    (PHASE_HEAD + 'prompt_tokens = {dist = "uniform", min = "a", max = 3}\n',
     "min must be an integer, got 'a'"),
    (PHASE_HEAD + 'prompt_tokens = {dist = "choice", choices = [1, "x"]}\n',
     "choices: every entry must be an integer"),
    (PHASE_HEAD + 'clients = "4"\n', "clients must be an integer, got '4'"),
    (PHASE_HEAD + "ignore_eos = 1\n", "ignore_eos must be true or false"),
    (PHASE_HEAD + 'expect = {"x" = true}\n', "expect.x must be a string or a number, got True"),
    (PHASE_HEAD + '[gate]\nttft_p50_ms = "x"\n', "gate.ttft_p50_ms must be a number"),
    ('model = 5\n[[phase]]\nname = "p"\n', "model must be a string"),
    ('model = "scripted"\nphase = 5\n', "phase must be an array"),
    (b'model = "scripted"\n# \xff\xfe\n[[phase]]\nname = "p"\n', "not UTF-8"),
]  # fmt: skip


@pytest.mark.parametrize("verb", ["run", "ab"])
@pytest.mark.parametrize(("text", "needle"), BAD_SUITES)
def test_a_mistyped_suite_is_one_line(tmp_path, verb, text, needle):
    suite = tmp_path / "bad.toml"
    suite.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = cli(*verb_args(verb, suite, scripted()), cwd=tmp_path)
    one_line_error(out, needle)
    assert not (tmp_path / "results" / "logs").exists(), "a server started for a bad suite"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--serve-cmd", scripted("--tag 'x")], "No closing quotation"),
        (["run", "--serve-cmd", scripted("{flags}"), "--flags", "--tag 'x"],
         "No closing quotation"),
        (["ab", "--base-cmd", scripted(), "--head-cmd", scripted(), "--head-flags", "--tag x"],
         "--head-flags ('--tag x') cannot reach the head arm: its command has no {flags}"),
        (["ab", "--base-cmd", scripted(), "--head-cmd", scripted(), "--head-env", "A='x"],
         "No closing quotation"),
        (["ab", "--base-cmd", scripted(), "--head-cmd", scripted("{flags}"), "--head-flags",
          "'x"], "No closing quotation"),
        (["ab", "--base-cmd", scripted(), "--head-cmd", scripted(), "--head-env", "NOEQUALS"],
         "KEY=VALUE"),
        (["ab", "--base", "HEAD", "--base-cmd", scripted(), "--head-cmd", scripted()],
         "give --base or --base-cmd, not both"),
        (["ab", "--head-url", "http://127.0.0.1:9", "--head-cmd", scripted()],
         "give --head-cmd or --head-url, not both"),
        (["ab", "--base-cmd", scripted(), "--head-cmd", scripted(), "--head-pid", "4"],
         "--head-pid only applies with --head-url"),
        (["ab", "--base-url", "http://127.0.0.1:9", "--head-cmd", scripted(), "--flags", "-x"],
         "--flags ('-x') cannot reach the base arm: it is a running server"),
        (["ab", "--base-cmd", scripted(), "--head-cmd", scripted(), "--isolated"],
         "--isolated applies to arms served from git refs"),
        (["ab", "--head-cmd", scripted()], "not a git repository"),
    ],
)  # fmt: skip
def test_unbalanced_quotes_and_conflicts_are_one_line(tmp_path, monkeypatch, args, needle):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # pytest's basetemp may
    # lie inside a git repository: this folder must still be outside one
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    out = cli(args[0], "--quiet", "--suite", str(suite), *args[1:], cwd=tmp_path)
    one_line_error(out, needle)


@pytest.mark.parametrize(
    ("value", "needle"),
    [("often", "'often' is neither a whole number nor 'auto'"), ("1", "1 is not in the range")],
)
def test_max_rounds_takes_a_count_or_auto(tmp_path, value, needle):
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    args = ["--base-cmd", scripted(), "--head-cmd", scripted(), "--max-rounds", value]
    out = cli("ab", "--quiet", "--suite", str(suite), *args, cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert needle in out.stderr and "--max-rounds" in out.stderr


NEVER_STARTS = "{python} -c 'import sys; sys.exit(3)' {port}"  # would fail the run if it ran


def test_unwritable_outputs_are_refused_before_anything_runs(tmp_path):
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    (tmp_path / "afile").write_text("x")
    run = ["run", "--quiet", "--suite", str(suite), "--serve-cmd", NEVER_STARTS]
    one_line_error(cli(*run, "--out", "afile/run.json", cwd=tmp_path), "cannot write to afile")
    usage = cli(*run, "--out", str(tmp_path), cwd=tmp_path)  # click's own check, with usage
    assert usage.returncode == 2 and "is a directory" in usage.stderr.splitlines()[-1]
    ab = ["ab", "--quiet", "--suite", str(suite), "--base-cmd", NEVER_STARTS, "--head-cmd",
          NEVER_STARTS]  # fmt: skip
    one_line_error(cli(*ab, "--out-dir", "afile/results", cwd=tmp_path), "cannot write to afile")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "runs").write_text("a file where a folder should be")
    one_line_error(cli(*run, cwd=tmp_path), "cannot write to results/runs")
    (tmp_path / "results" / "logs").write_text("a file where a folder should be")
    one_line_error(cli(*ab, cwd=tmp_path), "cannot write to results/logs")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_read_only_results_is_refused_before_the_run(tmp_path):
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    (tmp_path / "results" / "runs").mkdir(parents=True)
    (tmp_path / "results").chmod(0o500)
    (tmp_path / "results" / "runs").chmod(0o500)
    try:
        run = ["run", "--quiet", "--suite", str(suite), "--serve-cmd", NEVER_STARTS]
        one_line_error(cli(*run, cwd=tmp_path), "cannot write to results/runs")
        ab = ["ab", "--quiet", "--suite", str(suite), "--base-cmd", NEVER_STARTS,
              "--head-cmd", NEVER_STARTS]  # fmt: skip
        one_line_error(cli(*ab, cwd=tmp_path), "cannot write to results")
    finally:
        (tmp_path / "results" / "runs").chmod(0o700)
        (tmp_path / "results").chmod(0o700)


WRONG_SHAPES = [
    (b"5", "not a saved result", "not an A/B result"),
    (b"[1, 2]", "not a saved result", "not an A/B result"),
    (b'{"rounds": 5}', "not a saved result", "not an A/B result"),
    (b'{"runs": [{"x": 1}]}', "not a saved result", "not an A/B result"),
    (b'{"rounds": [{"base": 3, "head": 4}]}', "not a saved result", "not an A/B result"),
    (
        b'{"comparison": {"metrics": [{"name": 1}]}, "runs": [{"summary": {}, "fingerprint": 1}]}',
        "numeric tolerance",
        "not an A/B result",
    ),
    (b"{not json", "not JSON", "not JSON"),
    (b"\xff\xfe", "not UTF-8", "not UTF-8"),
]


@pytest.mark.parametrize(("data", "compare_needle", "report_needle"), WRONG_SHAPES)
def test_compare_and_report_on_json_of_the_wrong_shape(tmp_path, data, compare_needle,
                                                       report_needle):  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_bytes(data)
    one_line_error(cli("compare", str(bad), str(bad), cwd=tmp_path), compare_needle)
    one_line_error(cli("report", str(bad), cwd=tmp_path), report_needle)


@pytest.mark.parametrize(
    ("server_args", "error"),
    [
        ("--finish error", "stream ended with finish_reason 'error'"),
        ("--finish cancelled", "stream ended with finish_reason 'cancelled'"),
        ("--raw-event '[1,2]'", "stream event is not a JSON object"),
        ("--raw-event 5", "stream event is not a JSON object"),
        ("""--raw-event '{{"choices": "abc"}}'""", "choices is not a list of objects"),
        ("--raw-event '{{nope'", "stream event is not JSON"),
    ],
)
def test_failed_or_garbled_streams_are_errors_and_the_run_is_invalid(tmp_path, server_args,
                                                                     error):  # fmt: skip
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    out = tmp_path / "run.json"
    marker = unique_marker()
    r = cli("run", "--quiet", "--suite", str(suite), "--out", str(out),
            "--serve-cmd", scripted(server_args, model=marker), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    run = json.loads(out.read_text())["runs"][0]
    assert run["outcome"] == "invalid" and run["summary"]["errors"] == 6
    assert all(error in rec["error"] for rec in run["requests"]), run["requests"][0]["error"]
    assert any("all 6 requests failed" in why for why in run["invalid_reasons"]), run[
        "invalid_reasons"
    ]


def test_ab_whose_head_streams_end_in_error_is_invalid(tmp_path):
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    marker = unique_marker()
    r = cli("ab", "--quiet", "--suite", str(suite), "--rounds", "2", "--max-rounds", "2",
            "--base-cmd", scripted(model=marker),
            "--head-cmd", scripted("--finish error", model=marker), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert "verdict: INVALID (exit 2" in r.stdout
    (md,) = (tmp_path / "results").glob("*.md")
    assert md.read_text().startswith("# INVALID")


def test_the_real_process_keeps_the_contract(tmp_path):
    """The same contract where it matters most: `python -m harness` as CI starts it."""
    bad = write_suite(tmp_path, 'model = "scripted"\ngate = 5\n[[phase]]\nname = "p"\n')
    one_line_error(
        harness("run", "--suite", str(bad), cwd=tmp_path, timeout=300), "gate must be a table"
    )
    (tmp_path / "x.json").write_text("[1, 2]")
    one_line_error(harness("report", "x.json", cwd=tmp_path, timeout=300), "not an A/B result")


def test_an_unexpected_exception_is_one_line_and_exit_2(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("harness.cli.main.load_suite", broken)
    one_line_error(cli("run", "--suite", "smoke", cwd=tmp_path), "internal error: RuntimeError")


def saved_runs(path: Path, ttft_ms: list[float]) -> Path:
    runs = [make_run({"ttft_p50_ms": t, "ttft_p95_ms": t, "tok_s": 100.0}) for t in ttft_ms]
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_the_verdict_is_printed_and_kept_when_the_report_fails(tmp_path, monkeypatch):
    base = saved_runs(tmp_path / "a.json", [100.0, 101.0, 99.0, 100.5])
    head = saved_runs(tmp_path / "b.json", [150.0, 152.0, 149.0, 151.0])
    ok = cli("compare", str(base), str(head), cwd=tmp_path)
    assert ok.returncode == 1 and "error" not in ok.stderr and "report: results/" in ok.stdout

    def broken(*args, **kwargs):
        raise RuntimeError("template exploded\nwith two lines")

    monkeypatch.setattr("harness.cli.ab.write_report", broken)
    r = cli("compare", str(base), str(head), "--out-dir", "other", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # still the verdict's code, not 2, not 1-by-crash
    assert "verdict: REGRESSION (exit 1" in r.stdout and "report:" not in r.stdout
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert errors == ["error: report not written: RuntimeError: template exploded / with two lines"]
    saved = next((tmp_path / "results").glob("*.json"))  # `harness report`: the report is
    out = cli("report", str(saved), cwd=tmp_path)  # its product, so a failure there is exit 2
    one_line_error(out, "report not written: RuntimeError: template exploded / with two lines")


def test_the_exit_code_survives_a_verdict_table_that_fails(tmp_path, monkeypatch):
    base = saved_runs(tmp_path / "a.json", [100.0, 101.0, 99.0, 100.5])
    head = saved_runs(tmp_path / "b.json", [150.0, 152.0, 149.0, 151.0])

    def broken(*args, **kwargs):
        raise KeyError("label")

    monkeypatch.setattr("harness.cli.ab.print_verdict", broken)
    r = cli("compare", str(base), str(head), cwd=tmp_path)
    assert r.returncode == 1 and "verdict: REGRESSION (exit 1)" in r.stdout, r.stdout + r.stderr
    assert "error: verdict table not printed: KeyError" in r.stderr and "report: " in r.stdout


def test_checking_an_output_file_keeps_what_it_holds(tmp_path):
    """The check before a run must not empty an earlier measurement: the run may still fail."""
    earlier = tmp_path / "run.json"
    earlier.write_text('{"runs": ["an earlier measurement"]}\n')
    assert writable_file(earlier) == earlier
    assert earlier.read_text() == '{"runs": ["an earlier measurement"]}\n'
    run = ["run", "--quiet", "--suite", str(write_suite(tmp_path, SUITE.format(extra="")))]
    failed = cli(*run, "--serve-cmd", NEVER_STARTS, "--out", str(earlier), cwd=tmp_path)
    assert failed.returncode == 2 and "an earlier measurement" in earlier.read_text()
