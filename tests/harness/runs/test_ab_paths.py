"""`harness ab` paths beyond A/A and a seeded regression, end to end on the scripted server and
the tiny engine: a workload mismatch caught after the first round with every run kept, the
null arm, rounds added while INCONCLUSIVE, --isolated, per-arm environments, an arm serving the
wrong commit, and the `compare` and `report` verbs on the saved result."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.results.saved import load_result

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import harness, start_harness, valid_attempt, valid_unless_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite
from helpers.throwaway_repo import ThrowawayRepo

SUITE = """
model = "scripted"
[[phase]]
name = "main"
endpoint = "{endpoint}"
clients = 2
requests = 6
prompt_tokens = 16
max_tokens = 4
[gate]
ttft_p50_ms = {tol}
"""


def saved(out: Path) -> dict:
    """The A/B result with its raw data (requests, timelines) from the .raw.json.gz beside it."""
    (path,) = out.glob("????-??-??-*.json")
    return load_result(path)


def test_a_workload_mismatch_stops_after_the_first_round_and_keeps_its_runs(tmp_path):
    # Chat prompts counted with their template (vLLM shape) vs content only (llama-cpp-python):
    # different prompt texts, so a different workload.
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(endpoint="chat", tol=0.5))
    out = tmp_path / "results"
    r = harness("ab", "--quiet", "--suite", str(suite), "--rounds", "4", "--out-dir", str(out),
                "--base-cmd", scripted("--tokenize vllm", model=marker),
                "--head-cmd", scripted("--tokenize llamacpp", model=marker),
                cwd=REPO, cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    ab = saved(out)
    assert len(ab["rounds"]) == 1 and all(ab["rounds"][0][a] for a in ("base", "head"))
    (problem,) = ab["comparison"]["invalid"]
    assert "fingerprints differ" in problem and "prompts_sha256" in problem
    (logs,) = (out / "logs" / "t").iterdir()  # this A/B's own folder
    assert sorted(p.name for p in logs.glob("*.run.json")) == [
        "round1-base.run.json",
        "round1-head.run.json",
    ]
    assert not wait_no_survivors(marker)


def test_null_arm_and_rounds_added_while_inconclusive_then_report_and_compare(tmp_path):
    # Head's TTFT is 40 ms times 1.3, 0.85, 1.25, 0.8 in its four processes (base and null:
    # 40 ms): two rounds give head/base 1.3 and 0.85, an interval far wider than the 10%
    # tolerance (INCONCLUSIVE whatever the machine does), so two rounds are added up to
    # --max-rounds. Also: with --residency together each round's arms are launched together
    # before the first is measured; one at a time (the default for command arms), each starts
    # after the one before it was measured.
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(endpoint="completions", tol=0.1))

    def attempt(n: int):
        out = tmp_path / f"results{n}"
        factors = f"{tmp_path / f'head-starts{n}'}:1.3,0.85,1.25,0.8"
        r = harness("ab", "--quiet", "--suite", str(suite), "--rounds", "2", "--max-rounds", "4",
                    "--null-arm", "--out-dir", str(out), "--residency", "together",
                    "--base-cmd", scripted("--ttft-ms 40", model=marker),
                    "--head-cmd", scripted(f"--ttft-ms 40 --ttft-factors {factors}", model=marker),
                    cwd=REPO, cache=tmp_path / "cache")  # fmt: skip
        return (r, out), saved(out)

    (r, out), ab = valid_attempt(attempt)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(ab["rounds"]) == 4 and ab["null_arm"]
    assert all(rnd["null"] and rnd["null"]["valid"] for rnd in ab["rounds"])
    for rnd in ab["rounds"]:  # a round's three servers start together, then run in turn
        first = rnd[rnd["order"][0]]
        launched = [rnd[a]["clock_origin"] for a in rnd["order"]]
        first_send = first["clock_origin"] + min(r["send"] for r in first["requests"])
        assert max(launched) < first_send, rnd["order"]
    assert [n["name"] for n in ab["comparison"]["noise"]] == ["ttft_p50_ms"]
    (md,) = out.glob("????-??-??-*.md")
    assert "noise floor (null/base)" in md.read_text()
    assert not wait_no_survivors(marker)
    # the saved result rendered again, and compared offline against itself (an A/A)
    again = tmp_path / "again"
    r = harness("report", str(md.with_suffix(".json")), "--out-dir", str(again),
                cwd=REPO, cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (again / md.name).read_text() == md.read_text()
    r = harness("compare", str(md.with_suffix(".json")), str(md.with_suffix(".json")),
                "--out-dir", str(tmp_path / "offline"),
                cwd=REPO, cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict: PASS" in r.stdout
    assert len(list((tmp_path / "offline").glob("*.md"))) == 1


TINY = """
model = "tiny"
[[phase]]
name = "main"
clients = 2
requests = 4
prompt_tokens = 16
max_tokens = 4
[gate]
ttft_p50_ms = 0.5
"""


STAND_IN_INSTALL = """\
mkdir -p .venv/bin
printf '#!/bin/sh\\necho "$@" >> {used}\\nexec {python} "$@"\\n' > .venv/bin/python
chmod +x .venv/bin/python
echo installed >> {used}
"""


def test_isolated_env_and_wrong_commit(tmp_path):
    """--isolated builds and serves each ref as the project file's [server.isolated] says (here
    a stand-in install that logs each use of its python, instead of a 3-minute install per sha),
    --base-env/--head-env reach their own server only, and an arm that reports another commit
    than it was built from is INVALID."""
    repo = ThrowawayRepo(tmp_path)
    used = tmp_path / "isolated-python-used"
    (repo.path / "scripts" / "install.sh").write_text(
        STAND_IN_INSTALL.format(used=used, python=sys.executable)
    )
    repo.git("commit", "-qam", "scripts: a stand-in install")
    suite = write_suite(tmp_path, TINY)
    out = tmp_path / "results"
    r = harness("ab", "--quiet", "--suite", str(suite), "--rounds", "2", "--max-rounds", "2",
                "--base", "HEAD", "--head", "HEAD", "--isolated", "--out-dir", str(out),
                "--base-env", "ENGINE_BATCH_WINDOW_MS=7",
                "--head-env", "SERVEGATE_COMMIT=0000000000000000000000000000000000000000",
                cwd=repo.path, cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    lines = used.read_text().splitlines()
    assert lines.count("installed") == 1  # one sha, built once for both arms
    # each arm's server of round 1, and no more: an invalid run makes the verdict INVALID
    # whatever a second round would show, so the gate stops after the round that shows it
    assert len([x for x in lines if "engine.cli serve" in x]) == 2
    ab = saved(out)
    assert len(ab["rounds"]) == 1
    for rnd in ab["rounds"]:
        assert valid_unless_starved(rnd["base"])
        assert rnd["base"]["server"]["config"]["batch_window_ms"] == 7
        assert rnd["head"]["server"]["config"]["batch_window_ms"] != 7
        assert not rnd["head"]["valid"]
        assert rnd["head"]["invalid_reasons"][-1].startswith("head served commit 0000000")
    assert ab["comparison"]["verdict"] == "INVALID"


def test_a_repository_without_a_project_file_is_one_line_exit_2(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("no project file here\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    said = {
        "": "no servegate.toml in",
        '[server]\nserve = "srv --port {port}"\n': "has no [server.isolated] table",
        '[server]\nserve = "srv"\n': "serve must contain {port}",
        '[server]\nserve = "srv {port} {gpu}"\n': "unknown placeholder(s) ['gpu']",
        '[server]\nbuild = 3\nserve = "srv {port}"\n': "build must be a string, got 3",
    }
    for text, needle in said.items():
        if text:
            (repo / "servegate.toml").write_text(text)
        r = harness("ab", "--isolated", cwd=repo, cache=tmp_path / "cache")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_an_interrupted_ab_keeps_the_runs_it_completed(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(endpoint="completions", tol=0.5))
    out = tmp_path / "results"
    # base's 6 requests take a moment; head's take 0.5 s a token, and are interrupted
    proc = start_harness(
        "ab", "--quiet", "--suite", str(suite), "--rounds", "3", "--out-dir", str(out),
        "--base-cmd", scripted("--ttft-ms 5", model=marker),
        "--head-cmd", scripted("--ttft-ms 5 --itl-ms 500", model=marker),
        cwd=REPO, cache=tmp_path / "cache", merge_stderr=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (kept := list(out.glob("logs/t/*/round1-base.run.json"))) and proc.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if not kept:
        proc.kill()
        raise AssertionError(f"round 1's base run never finished: {proc.communicate()[0]}")
    time.sleep(1.0)  # head is streaming, 0.5 s a token
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in text, text
    ab = saved(out)
    assert valid_unless_starved(ab["rounds"][0]["base"]) and ab["rounds"][0].get("head") is None
    assert ab["comparison"]["verdict"] == "INVALID"
    assert "interrupted" in ab["comparison"]["invalid"][0]
    assert not wait_no_survivors(marker)
