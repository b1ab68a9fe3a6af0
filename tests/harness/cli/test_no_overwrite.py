"""Nothing a verb names for itself replaces anything: two `harness run` started in the same
second, two `harness ab` into one --out-dir, two `compare` of one day, each keep their own
results and logs (each run's log beside its own JSON); `export` never replaces its input nor an
existing file it did not name; `merge --summary` never appends to a JSON input."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from helpers.arms import scripted
from helpers.cli import exit_agrees, harness, start_harness
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "{model}"
[[phase]]
name = "main"
clients = 2
requests = 4
prompt_tokens = 8
max_tokens = 2
[gate]
ttft_p50_ms = 0.5
"""


def both(*procs: subprocess.Popen) -> list[subprocess.CompletedProcess]:
    done = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def test_two_runs_in_one_second_keep_two_results_each_log_beside_its_json(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(model=marker))
    # every default name of the coming minute is already another run's result: whatever
    # second the two runs start in, their names meet the others' (and each other's)
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    now = time.time()
    theirs = {}
    for s in range(60):
        stamp = datetime.fromtimestamp(now + s, UTC).strftime("%Y%m%d-%H%M%S")
        theirs[runs / f"{stamp}-t.json"] = f'{{"someone": "else", "second": {s}}}\n'
    for path, text in theirs.items():
        path.write_text(text)
    cmd = scripted("--ttft-ms 5", model=marker)
    args = ("run", "--suite", str(suite), "--quiet", "--serve-cmd", cmd)
    results = both(*(start_harness(*args, cwd=tmp_path, cache=tmp_path / "cache") for _ in "ab"))
    written = []
    for r in results:
        (line,) = [x for x in r.stdout.splitlines() if x.startswith("run JSON: ")]
        written.append(tmp_path / line.removeprefix("run JSON: "))
        exit_agrees(r, json.loads(written[-1].read_text()))  # two runs at once may starve a client
    assert written[0] != written[1]
    for path in written:
        doc = json.loads(path.read_text())
        log = tmp_path / doc["runs"][0]["server"]["log_path"]
        assert log.resolve() == path.with_name(f"{path.stem}.server1.log").resolve()
        assert log.is_file()
    assert all(path.read_text() == text for path, text in theirs.items())
    assert len(list(runs.glob("*.json"))) == len(theirs) + 2
    assert not wait_no_survivors(marker)


def test_two_abs_into_one_out_dir_keep_every_result_and_log(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(model=marker))
    out = tmp_path / "results"
    cmd = scripted("--ttft-ms 5", model=marker)
    args = ("ab", "--quiet", "--suite", str(suite), "--rounds", "2", "--max-rounds", "2",
            "--out-dir", str(out), "--base-cmd", cmd, "--head-cmd", cmd)  # fmt: skip
    results = both(*(start_harness(*args, cwd=tmp_path, cache=tmp_path / "cache") for _ in "ab"))
    reports = []
    for r in results:
        (line,) = [x for x in r.stdout.splitlines() if x.startswith("report: ")]
        reports.append(Path(line.removeprefix("report: ")))
        exit_agrees(r, json.loads(reports[-1].with_suffix(".json").read_text()))
    assert reports[0] != reports[1] and all(p.is_file() for p in reports)
    assert len(list(out.glob("*.md"))) == 2 and len(list(out.glob("*.json"))) == 2
    folders = list((out / "logs" / "t").iterdir())
    assert len(folders) == 2  # one per A/B
    runs = 0
    for report in reports:
        result = json.loads(report.with_suffix(".json").read_text())
        (folder,) = {
            Path(rnd[arm]["server"]["log_path"]).parent
            for rnd in result["rounds"]
            for arm in ("base", "head")
        }
        # every run of this A/B kept at once beside its own server's log, in its own folder
        # (both rounds, unless a starved client made round 1 INVALID, which ends the A/B)
        assert len(result["rounds"]) == 2 or result["comparison"]["exit_code"] == 2
        for rnd in result["rounds"]:
            for arm in ("base", "head"):
                assert (folder / f"round{rnd['round']}-{arm}.server.log").is_file()
                kept = json.loads((folder / f"round{rnd['round']}-{arm}.run.json").read_text())
                assert kept["started_at"] == rnd[arm]["started_at"]
                runs += 1
    assert len(list(out.glob("logs/t/*/*.run.json"))) == runs
    assert not wait_no_survivors(marker)


def _saved_runs(tmp_path: Path) -> Path:
    """A run JSON of three runs (a fast scripted server, tiny suite)."""
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(model=marker))
    r = harness("run", "--suite", str(suite), "--quiet", "--out", "run.json", "--repeat", "3",
                "--serve-cmd", scripted("--ttft-ms 5", model=marker),
                cwd=tmp_path, cache=tmp_path / "cache", timeout=300)  # fmt: skip
    exit_agrees(r, json.loads((tmp_path / "run.json").read_text()))  # INVALID if starved
    return tmp_path / "run.json"


def test_export_never_replaces_its_input_nor_a_file_it_was_not_given(tmp_path):
    run = _saved_runs(tmp_path)
    before = run.read_bytes()
    for out in ("run.json", "./run.json", str(run), "sub/../run.json"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        r = harness(
            "export", "run.json", "--out", out, cwd=tmp_path, cache=tmp_path / "cache", timeout=300
        )
        assert r.returncode == 2 and "is the input" in r.stderr, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "link.json").symlink_to(run)
    r = harness(
        "export",
        "link.json",
        "--out",
        "run.json",
        cwd=tmp_path,
        cache=tmp_path / "cache",
        timeout=300,
    )
    assert r.returncode == 2 and "is the input" in r.stderr, r.stderr
    assert run.read_bytes() == before

    # three runs write o.json (named), then o-2.json and o-3.json: an o-2.json already there
    # (not named) is kept, and the second run goes to a free name, said so
    mine = tmp_path / "o-2.json"
    mine.write_text("mine\n")
    r = harness(
        "export", "run.json", "--out", "o.json", cwd=tmp_path, cache=tmp_path / "cache", timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert mine.read_text() == "mine\n"
    assert "vLLM result: o-2-2.json (o-2.json exists: not replaced)" in r.stdout, r.stdout
    for name in ("o.json", "o-2-2.json", "o-3.json"):
        assert json.loads((tmp_path / name).read_text())["completed"] == 4

    # an existing OUT (here another run JSON) is replaced only with --force; a FIFO or a link
    # planted as OUT is refused, never opened
    other = tmp_path / "other.json"
    other.write_bytes(before)
    again = ("export", "run.json", "--out")
    r = harness(*again, "other.json", cwd=tmp_path, cache=tmp_path / "cache", timeout=300)
    assert r.returncode == 2 and "exists: not replaced (--force replaces it)" in r.stderr, r.stderr
    assert other.read_bytes() == before
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "out.json").symlink_to(tmp_path / "elsewhere.json")
    for planted in ("fifo.json", "out.json"):
        r = harness(*again, planted, "--force", cwd=tmp_path, cache=tmp_path / "cache", timeout=60)
        assert r.returncode == 2 and "not a regular file" in r.stderr, r.stderr
    assert not (tmp_path / "elsewhere.json").exists()
    r = harness(*again, "other.json", "--force", cwd=tmp_path, cache=tmp_path / "cache",
                timeout=300)  # fmt: skip
    assert r.returncode == 0 and json.loads(other.read_text())["completed"] == 4, r.stderr


def test_compare_twice_in_one_folder_keeps_both_and_merge_never_appends_to_them(tmp_path):
    run = _saved_runs(tmp_path)
    reports = []
    for _ in range(2):
        r = harness(
            "compare", "run.json", "run.json", cwd=tmp_path, cache=tmp_path / "cache", timeout=300
        )
        (line,) = [x for x in r.stdout.splitlines() if x.startswith("report: ")]
        reports.append(tmp_path / line.removeprefix("report: "))
        exit_agrees(r, json.loads(reports[-1].with_suffix(".json").read_text()))
    assert reports[0] != reports[1] and all(p.is_file() for p in reports)
    assert len(list((tmp_path / "results").glob("*.md"))) == 2
    assert len(list((tmp_path / "results").glob("*.json"))) == 2

    ab = reports[0].with_suffix(".json")
    before = ab.read_bytes()
    for target in (str(ab), "results/../" + str(ab.relative_to(tmp_path))):
        r = harness(
            "merge",
            str(ab),
            "--summary",
            target,
            cwd=tmp_path,
            cache=tmp_path / "cache",
            timeout=300,
        )
        assert r.returncode == 2 and "one of the inputs" in r.stderr, r.stdout + r.stderr
    r = harness(
        "merge", str(ab), "--summary", str(run), cwd=tmp_path, cache=tmp_path / "cache", timeout=300
    )  # JSON, not an input
    assert r.returncode == 2 and "is a JSON file" in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert ab.read_bytes() == before and json.loads(run.read_text())["runs"]
    r = harness(
        "merge",
        str(ab),
        "--summary",
        "merged.md",
        cwd=tmp_path,
        cache=tmp_path / "cache",
        timeout=300,
    )
    exit_agrees(r, json.loads(before))  # merge exits with its input's verdict
    assert (tmp_path / "merged.md").read_text().strip(), r.stderr
