"""`harness sweep` end to end against the scripted server with `--max-streams N` (N streams at
once, the rest wait): the knee is reported at N, and a head that saturates at a lower N exits 1
naming the first regressing level. Bad input is one line and exit 2."""

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import main

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import harness, saved_result, valid_attempt
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

PNG = b"\x89PNG\r\n\x1a\n"
# 30 ms to the first token, then 16 tokens 25 ms apart: one stream holds its slot ~400 ms, long
# beside a client's turnaround between requests and a loaded machine's stalls
SHAPE = """
name = "sat"
model = "scripted"
[[phase]]
name = "main"
prompt_tokens = 8
max_tokens = 16
[gate]
ttft_p95_ms = 0.25
tok_s = 0.15
"""


def harness_sweep(*args: str, tmp_path: Path, suite: str = SHAPE) -> subprocess.CompletedProcess:
    """`harness sweep` of `suite` into tmp_path/out; once more where the machine starved the
    load client (the first try's results moved aside)."""
    suite = write_suite(tmp_path, suite)

    def attempt(n: int):
        if n > 1:
            (tmp_path / "out").rename(tmp_path / "starved")
        r = harness("sweep", "--quiet", "--out-dir", str(tmp_path / "out"), "--suite", str(suite),
                    *args, cwd=REPO, cache=tmp_path / "cache", timeout=300)  # fmt: skip
        return r, saved_result(tmp_path / "out")

    return valid_attempt(attempt)[0]


def saturating(n: int, marker: str) -> str:
    return scripted(f"--ttft-ms 30 --itl-ms 25 --max-streams {n}", model=marker)


def result_of(tmp_path: Path) -> tuple[dict, str]:
    (md,) = sorted((tmp_path / "out").glob("????-??-??-sweep-sat-*.md"))
    text = md.read_text()
    for kind in ("throughput", "ttft", "latency"):
        png = md.with_name(f"{md.stem}-{kind}.png").read_bytes()
        assert png.startswith(PNG) and f"{md.stem}-{kind}.png" in text
    return json.loads(md.with_suffix(".json").read_text()), text


@pytest.mark.timing
def test_one_arm_that_serves_four_streams_has_its_knee_at_four(tmp_path):
    r = harness_sweep(
        "--serve-cmd",
        saturating(4, unique_marker()),
        "--levels",
        "1,2,4,8",
        "--rounds",
        "1",
        "--slo",
        "ttft_p95_ms=250",
        "--knee-gain",
        "0.3",
        "--requests",
        "8",
        tmp_path=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result, text = result_of(tmp_path)
    j = result["judgement"]
    assert j["knee"] == {"arm": 4} and j["knee_gain"] == 0.3
    # at 8 clients, half of them wait a whole stream (~400 ms) for a slot: the SLO fails there
    assert j["goodput"] == {"arm": 4} and j["slo_met"]["arm"] == [True, True, True, False]
    tok = [c["tok_s"] for c in j["curves"]["arm"]]
    assert tok[2] > 3 * tok[0]  # four streams at once, with a wide margin
    assert [c["requests"] for c in j["curves"]["arm"]] == [8, 8, 8, 8]
    assert "arm: knee 4, goodput 4" in r.stdout and text.startswith("# VALID: exit 0")


@pytest.mark.timing
def test_head_saturating_at_two_streams_regresses_first_at_level_four(tmp_path):
    marker = unique_marker()
    r = harness_sweep(
        "--base-cmd",
        saturating(4, marker),
        "--head-cmd",
        saturating(2, marker),
        "--levels",
        "2,4,8",
        "--rounds",
        "3",
        "--requests",
        "8",
        tmp_path=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    result, text = result_of(tmp_path)
    j = result["judgement"]
    assert j["first_regression"] == "c4" and "tok_s" in j["first_regression_metrics"]
    assert j["knee"] == {"base": 4, "head": 2} and j["knee_moved"]
    assert j["levels"]["c2"]["verdict"] != "REGRESSION"
    assert j["levels"]["c8"]["verdict"] == "REGRESSION"
    assert "head first regresses at c4" in r.stdout and "knee moved 4 -> 2" in r.stdout
    assert text.startswith("# REGRESSION: exit 1") and "Head first regresses at **c4**" in text
    orders = [(x["round"], x["arm"]) for x in result["runs"]]
    assert orders == [(1, "base"), (1, "head"), (2, "head"), (2, "base"), (3, "base"), (3, "head")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--levels", "1,x"], "levels are comma-separated numbers"),
        (["--levels", "1", "--rates", "1"], "--levels or --rates, not both"),
        (["--slo", "speed=3"], "--slo wants METRIC=LIMIT"),
        (["--ref", "HEAD", "--head-flags", "--parallel 2"], "for one arm, or --base/--head"),
        (["--suite", "no-such-suite"], "no suite named"),
        (["--find-capacity"], "--find-capacity needs an [slo] table in suite 'sweep'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    r = CliRunner().invoke(main, ["sweep", "--quiet", *args])  # in process: no server starts
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_rates_run_open_loop_levels_one_cold_server_each(tmp_path):
    r = harness_sweep(
        "--serve-cmd",
        saturating(4, unique_marker()),
        "--rates",
        "4,8",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--cold",
        "level",
        tmp_path=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result, _ = result_of(tmp_path)
    assert result["names"] == ["r4", "r8"] and result["cold"] == "level"
    assert len(result["runs"]) == 2  # one cold server per level
    phases = [x["run"]["workload"]["phases"] for x in result["runs"]]
    assert [(p["name"], p["arrival"], p["rate"], p["clients"]) for (p,) in phases] == [
        ("r4", "rate", 4.0, 6), ("r8", "rate", 8.0, 6),
    ]  # fmt: skip


@pytest.mark.timing  # 30 ms against a 250 ms limit against ~430 ms, on real time
def test_find_capacity_searches_on_the_highest_levels_server_and_reports_the_bracket(tmp_path):
    limits = "\n[slo]\nttft_ms = 250\n[capacity]\nmode = 'concurrency'\nstart = 2\nmax = 8\n"
    r = harness_sweep(
        "--serve-cmd", saturating(4, unique_marker()), "--levels", "1,2", "--requests", "4",
        "--rounds", "1", "--cold", "level", "--find-capacity",
        tmp_path=tmp_path, suite=SHAPE + limits,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    result, text = result_of(tmp_path)
    searched = [x["run"].get("capacity") for x in result["runs"]]
    assert searched[0] is None and searched[1] is not None  # only after the highest level
    assert [lv["level"] for lv in searched[1]["levels"]] == [2, 4, 8, 6, 5]
    found = result["judgement"]["capacity"]["arm"]
    assert found["runs"] == [{"met_level": 4, "missed_level": 5, "levels": 5,
                              "capacity_req_s": found["capacity_req_s"]}]  # fmt: skip
    assert found["capacity_req_s"] > 0 and "arm: capacity" in r.stdout
    (md,) = (tmp_path / "out").glob("*-sweep-sat-*.md")
    assert md.with_name(f"{md.stem}-capacity.png").read_bytes().startswith(PNG)
    assert "## Capacity" in text and "[4, 5]" in text and f"({md.stem}-capacity.png)" in text


@pytest.mark.parametrize("arms", ["one", "two"])
def test_a_server_that_never_becomes_ready_is_invalid_with_its_log_tail(tmp_path, arms):
    marker = unique_marker()
    never = scripted("--load-ms 600000", model=marker)  # /health says 503 for ten minutes
    chosen = ["--serve-cmd", never] if arms == "one" else ["--base-cmd", never, "--head-cmd", never]
    r = harness_sweep("--levels", "1,2", "--rounds", "1", "--ready-timeout", "2", *chosen,
                      tmp_path=tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "server not ready" in r.stdout and "scripted server on port" in r.stdout
    (md,) = (tmp_path / "out").glob("*-sweep-*.md")
    assert "INVALID" in md.read_text()
    assert not wait_no_survivors(marker)
