"""The command line: help a newcomer can act on, one-line errors, the run JSON, and the
recorded fallbacks (tokenizer, usage mismatches, failing requests, --url arms)."""

from __future__ import annotations

import json

import pytest

from harness.arms.arms import make_arm
from harness.arms.launcher import Launcher
from harness.runs.measure import run_arm
from harness.workload.suite import load_suite

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import client_starved, harness
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "main"
clients = 2
requests = 6
prompt_tokens = 24
max_tokens = 4
{extra}
"""


def test_help_texts_explain_the_arms():
    top = harness("--help", cwd=REPO, timeout=60)
    assert top.returncode == 0 and "harness run --suite smoke" in top.stdout
    run = harness("run", "--help", cwd=REPO, timeout=60)
    assert run.returncode == 0
    for needle in ("--serve-cmd", "{port}", "--url", "--pid", "--repeat", "Exits 0"):
        assert needle in run.stdout


def test_suites_lists_smoke():
    out = harness("suites", cwd=REPO, timeout=60)
    lines = out.stdout.splitlines()
    assert out.returncode == 0
    assert any(line.startswith("smoke ") and " tiny " in line for line in lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--suite", "nope"], "no suite named 'nope'"),
        (["run", "--suite", "smoke", "--serve-cmd", "srv --port 1"], "must contain {port}"),
        (["run", "--suite", "smoke", "--url", "http://127.0.0.1:9", "--serve-cmd", "x {port}"],
         "not both"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_line(args, message):
    out = harness(*args, cwd=REPO, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and message in out.stderr


def test_bad_option_values_get_clicks_usage_hint():
    out = harness("run", "--suite", "smoke", "--repeat", "0", cwd=REPO, timeout=60)
    assert out.returncode == 2 and "Invalid value for '--repeat'" in out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_url_is_a_clear_infra_failure():
    out = harness(
        "run",
        "--suite",
        "smoke",
        "--url",
        "http://127.0.0.1:9",
        "--ready-timeout",
        "1",
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode == 2 and "error: server not ready at http://127.0.0.1:9" in out.stderr
    assert "Traceback" not in out.stderr


def test_unmet_expectation_makes_the_run_invalid(tmp_path):
    marker = unique_marker()
    expect = '[phase.expect]\n"engine_prefill_forwards_total{path=\\"batched\\"}" = ">=1"'
    suite = write_suite(tmp_path, SUITE.format(extra=expect))
    out = tmp_path / "r.json"
    res = harness("run", "--quiet", "--suite", str(suite), "--out", str(out),
                  "--serve-cmd", scripted(model=marker), cwd=REPO, timeout=60)  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert "INVALID" in res.stdout and "delta was 0" in res.stdout
    run = json.loads(out.read_text())["runs"][0]
    assert run["valid"] is False and run["outcome"] == "invalid"
    ours = [why for why in run["invalid_reasons"] if "the client fell behind" not in why]
    assert ours == [  # and, on a loaded machine, perhaps a starved client: the machine's
        "phase 'main': expected engine_prefill_forwards_total{path=\"batched\"} >= 1, delta was 0"
    ]
    assert run["counters"]["main"]['engine_prefill_forwards_total{path="single"}'] == 6
    assert not wait_no_survivors(marker)


def test_run_record_shape_and_recorded_fallbacks(tmp_path):
    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(extra=""))))
    cmd = scripted("--tokenize llamacpp --usage-extra 1 --fail-every 3 --no-metrics", model=marker)
    run = run_arm(suite, make_arm(marker, serve_cmd=cmd), tmp_path / "s.log")
    assert run["prompt_tokenizer"] == "server /extras/tokenize"
    s = run["summary"]
    assert s["errors"] == 2 and s["token_mismatches"] == 4
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    failed = [r for r in run["requests"] if not r["ok"]]
    assert {(r["status"], r["error"]) for r in failed} == {(500, "scripted failure")}
    assert all(r["prompt_tokens"] == 24 for r in run["requests"])
    assert all(r["usage_prompt_tokens"] == 24 for r in run["requests"] if r["ok"])
    assert run["counters"] == {"main": {}}
    for key in ("valid", "invalid_reasons", "fingerprint", "counters", "timeline", "machine",
                "server", "requests", "summary"):  # fmt: skip
        assert key in run
    assert run["server"]["log_path"] == str(tmp_path / "s.log")
    assert run["machine"]["logical_cores"] >= 1 and run["machine"]["cpu_model"]
    assert len(run["fingerprint"]) == 16


def test_streams_cut_short_are_errors_and_missing_usage_is_counted(tmp_path):
    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(extra=""))))
    cmd = scripted("--cut-after 1 --no-usage", model=marker)
    run = run_arm(suite, make_arm(marker, serve_cmd=cmd), tmp_path / "s.log")
    assert run["summary"]["errors"] == 6 and not run["valid"]
    assert {r["error"] for r in run["requests"]} == {"stream cut off: no finish_reason"}
    assert run["invalid_reasons"][0].startswith("phase 'main': all 6 requests failed")
    ok = run_arm(suite, make_arm(marker, serve_cmd=scripted("--no-usage", model=marker)),
                 tmp_path / "t.log")  # fmt: skip
    assert ok["valid"] or client_starved({"runs": [ok]}), ok["invalid_reasons"]
    assert ok["summary"]["usage_missing"] == 6
    assert ok["summary"]["token_mismatches"] == 0 and ok["summary"]["tok_s"] > 0


def test_local_approximation_when_the_server_cannot_tokenize(tmp_path):
    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(extra=""))))
    cmd = scripted("--tokenize none", model=marker)
    run = run_arm(suite, make_arm(marker, serve_cmd=cmd), tmp_path / "s.log")
    assert run["prompt_tokenizer"].startswith("local-approx")
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    assert run["summary"]["errors"] == 0


def test_url_arm_with_and_without_pid(tmp_path):
    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(extra=""))))
    arm = make_arm(marker, serve_cmd=scripted(model=marker))
    with Launcher(arm, tmp_path / "s.log") as server:
        with_pid = run_arm(suite, make_arm(marker, url=server.url, pid=server.pid), tmp_path / "x")
        bare = run_arm(suite, make_arm(marker, url=server.url), tmp_path / "y")
    assert not wait_no_survivors(marker)
    mem = with_pid["phases"]["main"]["memory"]
    assert mem["peak_rss_source"] == "VmHWM" and with_pid["timeline"]["rss"]
    bare_mem = bare["phases"]["main"]["memory"]
    assert bare_mem["peak_rss_source"] == "server /v1/memory" and not bare["timeline"]["rss"]
    assert bare["summary"]["startup_s"] is None and bare["server"]["log_path"] is None
    assert with_pid["fingerprint"] == bare["fingerprint"]


def test_fingerprint_follows_the_workload(tmp_path):
    """Every fact of the workload moves the fingerprint; the server's identity is not in it."""
    from dataclasses import replace

    from harness.workload.arrival import Burst
    from harness.workload.fingerprint import fingerprint, workload

    (phase,) = load_suite(str(write_suite(tmp_path, SUITE.format(extra="")))).phases
    lengths = [24] * phase.requests

    def fp(p=phase, n=lengths, suite="s", prompts="abc"):
        return fingerprint(workload(suite, [(p, n)], prompts))

    assert fp() == fp()
    changed = {
        "clients": fp(replace(phase, clients=3)),
        "prompt lengths": fp(n=[24] * 5 + [25]),
        "max_tokens": fp(replace(phase, max_tokens=5)),
        "arrival": fp(replace(phase, arrival=Burst())),
        "endpoint": fp(replace(phase, endpoint="chat")),
        "prefix_tokens": fp(replace(phase, prefix_tokens=8)),
        "seed": fp(replace(phase, seed=1)),
        "suite": fp(suite="t"),
        "prompt texts": fp(prompts="abd"),
    }
    assert [k for k, v in changed.items() if v == fp()] == []
    facts = json.dumps(workload("s", [(phase, lengths)], "abc"))
    assert "scripted" not in facts  # the model id is the server's identity, not the workload


SUITE_AT = """
model = "scripted"
{top}
[[phase]]
name = "main"
clients = 2
requests = 6
prompt_tokens = 24
max_tokens = 4
{tables}
"""
SLO = "[slo]\nttft_ms = 500"
MORE = '[[phase]]\nname = "more"\nrequests = 2\nprompt_tokens = 24\nmax_tokens = 4'
# two suites that differ only in what is named: (first, second, whether the fingerprint moves)
SUITE_CHANGES = {
    "identical": ({}, {}, False),
    "an [slo] table": ({}, {"tables": SLO}, True),
    "an [slo] limit": ({"tables": SLO}, {"tables": "[slo]\nttft_ms = 600"}, True),
    "which [slo] limit": ({"tables": SLO}, {"tables": "[slo]\ntpot_ms = 500"}, True),
    "one more [slo] limit": ({"tables": SLO}, {"tables": SLO + "\ne2e_ms = 900"}, True),
    "[slo] order": (
        {"tables": "[slo]\nttft_ms = 500\ntpot_ms = 50"},
        {"tables": "[slo]\ntpot_ms = 50\nttft_ms = 500.0"},
        False,
    ),
    "the suite's name": ({"top": 'name = "t"'}, {"top": 'name = "u"'}, True),
    "a second phase": ({}, {"tables": MORE}, True),
    # what only judges or describes a run, or where its file lies, is not the work
    "a [gate]": ({}, {"tables": "[gate]\nttft_p50_ms = 0.1\nmemory_slack_mib = 64"}, False),
    "a description": ({}, {"top": 'description = "x"'}, False),
    "the folder": ({"dir": "a"}, {"dir": "b"}, False),
}


@pytest.mark.parametrize(("first", "second", "moves"), SUITE_CHANGES.values(), ids=SUITE_CHANGES)
def test_the_fingerprint_covers_the_suite_tables_that_change_the_work(
    tmp_path, first, second, moves
):
    """Suite-level facts (its [slo] above all: goodput under other limits is another number)
    as `harness run` fingerprints them, from the TOML a user writes."""
    from harness.runs.measure import draw_lengths
    from harness.workload.fingerprint import fingerprint, workload

    def fp(given: dict) -> str:
        text = SUITE_AT.format(top=given.get("top", ""), tables=given.get("tables", ""))
        (folder := tmp_path / given.get("dir", "same")).mkdir(exist_ok=True)
        suite = load_suite(str(write_suite(folder, text)))
        lengths = [(p, draw_lengths(p)) for p in suite.phases]
        return fingerprint(workload(suite.name, lengths, "abc", suite.slo))

    assert fp(first) == fp(first)
    assert (fp(first) != fp(second)) is moves


def test_a_run_fingerprints_its_suites_slo(tmp_path):
    """The run path itself passes the suite's [slo] into the workload it fingerprints."""
    from harness.workload.fingerprint import fingerprint

    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(extra=SLO))))
    run = run_arm(suite, make_arm(marker, serve_cmd=scripted(model=marker)), tmp_path / "s.log")
    assert run["workload"]["slo"] == {"ttft_ms": 500.0}
    without = {k: v for k, v in run["workload"].items() if k != "slo"}
    assert run["fingerprint"] == fingerprint(run["workload"]) != fingerprint(without)
    assert not wait_no_survivors(marker)
