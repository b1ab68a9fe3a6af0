"""Files a hostile or careless user hands the verbs that read saved results (report, compare,
merge, export, history, publish): a device, a FIFO, a link out of a history folder, a site
published inside the folder it reads, saved results whose fields are of the wrong type, out of
range or not finite, cost models that would never end, a ready_path that is no path. Each is
one line and exit 2 in bounded time (or, in a history, one skipped file), never a traceback."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.arms.project import ProjectError, load_project
from harness.load.record import RequestRecord

from helpers.cli import cli, one_line_error
from helpers.fake_runs import make_run

SHA_A, SHA_B = "a" * 40, "b" * 40
SUMMARY = {"ttft_p50_ms": 20.0, "ttft_p95_ms": 25.0, "tok_s": 100.0, "peak_rss_bytes": 2.0e8}
MACHINE = {"cpu_model": "Test CPU", "logical_cores": 2, "cpu_flags": [], "load_average": [0.1]}


def request(i: int) -> dict:
    rec = RequestRecord("load", i, 8, 4, arrival=0.1 * i, send=0.1 * i, first_token=0.1 * i + 0.02,
                        end=0.1 * i + 0.05, itl_s=[0.01, 0.01, 0.01], output_tokens=4,
                        client_tokens=4, status=200)  # fmt: skip
    return rec.as_dict()


def run_record(ttft: float = 20.0, requests: bool = True) -> dict:
    run = make_run(SUMMARY | {"ttft_p50_ms": ttft})
    phase = {"name": "load", "arrival": "concurrency", "clients": 2}
    run |= {"suite": {"name": "s", "gate": {"ttft_p50_ms": 0.1}}, "machine": dict(MACHINE),
            "started_at": "2026-12-01T10:00:00+00:00", "server": {"commit": None},
            "workload": {"phases": [phase]}}  # fmt: skip
    if requests:
        run["requests"] = [request(i) for i in range(3)]
    return run


def run_json(sha: str = SHA_A, depth: int = 1, ttft: float = 20.0) -> dict:
    """A `harness run --ref SHA` JSON: its arm's commit and three runs."""
    arm = {"label": sha[:8], "commit": sha, "date": f"2026-12-0{depth}T00:00:00+00:00",
           "subject": f"commit {depth}", "depth": depth}  # fmt: skip
    return {"arm": arm, "runs": [run_record(ttft) for _ in range(3)]}


def write(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, allow_nan=True))
    return path


@pytest.fixture(scope="module")
def ab_doc(tmp_path_factory) -> dict:
    """A real A/B result, as `harness compare` saves it (slim: its runs hold no raw data)."""
    tmp = tmp_path_factory.mktemp("ab")
    a = write(tmp / "a.json", {"runs": [run_record(requests=False) for _ in range(3)]})
    b = write(tmp / "b.json", {"runs": [run_record(21.0, requests=False) for _ in range(3)]})
    out = cli("compare", str(a), str(b), "--out-dir", str(tmp / "out"), cwd=tmp)
    assert out.returncode in (0, 1), out.stderr
    (saved,) = (tmp / "out").glob("*.json")
    doc = json.loads(saved.read_text())
    assert "raw" not in doc and doc["comparison"]["metrics"]
    for arm, sha in (("base", SHA_A), ("head", SHA_B)):
        doc[arm] |= {"commit": sha, "date": "2026-12-01T00:00:00+00:00", "subject": "s", "depth": 2}
    return doc


def sweep_doc(ab: dict) -> dict:
    level = ab["comparison"] | {"metrics": ab["comparison"]["metrics"][:1]}
    judgement = {"verdict": "PASS", "exit_code": 0, "levels": {"c1": level}}
    return {"schema": "servegate.sweep/1", "suite": "s", "judgement": judgement, "runs": []}


BISECT = {"schema": "servegate.bisect/1", "suite": "s", "culprit": {"short": "abc", "subject": "x"}}


# ---------------------------------------------------------------- devices, FIFOs and links out


def hostile(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "h" / "bad.json"
    path.parent.mkdir(exist_ok=True)
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    return path


def reading_verbs(bad: Path, good: Path, out: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(bad), "--out-dir", str(out)],
        "compare-a": ["compare", str(bad), str(good), "--out-dir", str(out)],
        "compare-b": ["compare", str(good), str(bad), "--out-dir", str(out)],
        "merge": ["merge", str(bad)],
        "export": ["export", str(bad), "--out", str(out / "e.json")],
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
@pytest.mark.parametrize("verb", ["report", "compare-a", "compare-b", "merge", "export"])
def test_a_device_or_fifo_given_to_a_verb_is_one_line(tmp_path, kind, verb):
    bad = hostile(tmp_path, kind)
    good = write(tmp_path / "good.json", run_json())
    args = reading_verbs(bad, good, tmp_path / "out")[verb]
    one_line_error(cli(*args, cwd=tmp_path), "not a regular file")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
@pytest.mark.parametrize("verb", ["history", "publish"])
def test_a_device_or_fifo_in_a_history_folder_is_skipped(tmp_path, kind, verb):
    hostile(tmp_path, kind)
    write(tmp_path / "h" / "good.json", run_json())
    args = [verb, str(tmp_path / "h")] + (["--out", str(tmp_path / "site")] if verb == "publish"
                                          else [])  # fmt: skip
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    skipped = [line for line in out.stderr.splitlines() if line.startswith("skipped: bad.json")]
    assert len(skipped) == 1, out.stderr
    assert "not a regular file" in skipped[0] or "a link out of" in skipped[0], skipped


def test_a_link_out_of_the_history_folder_is_neither_read_nor_published(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-MARKER root:x:0:0\n")
    outside = write(tmp_path / "elsewhere" / "result.json", run_json(SHA_B, 2, ttft=40.0))
    folder = tmp_path / "h"
    write(folder / "good.json", run_json())
    (folder / "good.md").symlink_to(secret)  # the "report" beside a result
    (folder / "plot.png").symlink_to(secret)
    (folder / "out.json").symlink_to(outside)
    out = cli("publish", str(folder), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "skipped: out.json" in out.stderr and "a link out of" in out.stderr, out.stderr
    published = [p for p in (tmp_path / "site").rglob("*") if p.is_file()]
    assert published and not any("SECRET-MARKER" in p.read_text("latin-1") for p in published)
    history = cli("history", str(folder), cwd=tmp_path)
    assert history.returncode == 0 and "1 commit(s)" in history.stdout, history.stdout


def test_publish_into_the_history_folder_does_not_count_its_own_output(tmp_path):
    folder = tmp_path / "h"
    write(folder / "a.json", run_json(SHA_A, 1))
    write(folder / "b.json", run_json(SHA_B, 2))
    for _ in range(3):
        out = cli("publish", str(folder), "--out", str(folder / "site"), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    index = (folder / "site" / "index.html").read_text()
    assert "median of 3 run(s)" in index and "median of 6 run(s)" not in index
    assert "skipped" not in out.stderr, out.stderr


# ---------------------------------------------------------------- malformed saved results


def mutate(doc: dict, dotted: str, value: object) -> dict:
    doc = copy.deepcopy(doc)
    *parents, last = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    target = doc
    for key in parents:
        target = target[key]
    target[last] = value
    return doc


AB_VERBS = ("report", "compare", "merge")
RUN_VERBS = ("compare", "export", "history")
MALFORMED = [
    # an A/B result: what report, compare (its head's runs) and merge read
    ("ab", "comparison.exit_code", -7, "comparison.exit_code is -7", AB_VERBS),
    ("ab", "comparison.exit_code", 2**70, "exit_code is 1180591620717411303424", AB_VERBS),
    ("ab", "comparison.rounds", "5", "comparison.rounds", AB_VERBS),
    ("ab", "comparison.verdict", ["PASS"], "comparison.verdict", AB_VERBS),
    ("ab", "comparison.metrics", [{}], "comparison.metrics[0].name is missing", AB_VERBS),
    ("ab", "comparison.metrics.0.ratio", "x", "comparison.metrics[0].ratio is 'x'", AB_VERBS),
    ("ab", "comparison.metrics.0.ci_low", float("nan"), "metrics[0].ci_low is nan", AB_VERBS),
    ("ab", "comparison.warnings", [{}], "comparison.warnings[0]", AB_VERBS),
    ("ab", "comparison.schedule", {"looks": [-1]}, "comparison.schedule.looks[0] is -1", AB_VERBS),
    ("ab", "rounds.0.head.summary.tok_s", float("nan"), "tok_s is nan", AB_VERBS),
    ("ab", "rounds.0.head.valid", "yes", "rounds[0].head.valid is 'yes'", AB_VERBS),
    ("ab", "rounds.0.head.machine", {"cpu_model": 5}, "head.machine.cpu_model is 5", AB_VERBS),
    ("ab", "rounds.0.head.machine.logical_cores", -3, "machine.logical_cores is -3", AB_VERBS),
    ("ab", "rounds.0.head.server", "x", "rounds[0].head.server is 'x'", AB_VERBS),
    ("ab", "rounds.0.round", "1", "rounds[0].round is '1'", AB_VERBS),
    ("ab", "head.commit", ["a"], "head.commit is ['a']", ("report", "merge")),
    ("ab", "head.depth", "3", "head.depth is '3'", ("report", "merge")),
    ("ab", "suite", 5, "suite", AB_VERBS),
    ("ab", "rounds.0.head.server", {"runtime": 5}, "head.server.runtime is 5", AB_VERBS),
    ("ab", "rounds.0.head.counters", {"load": {"x": None}}, "counters.load.x is None", AB_VERBS),
    ("ab", "rounds.0.head.sampler", {"hz": "x"}, "rounds[0].head.sampler.hz is 'x'", AB_VERBS),
    ("ab", "rounds.0.head.phases", {"load": {"expect": [{}]}},
     "head.phases.load.expect[0].series is missing", AB_VERBS),
    ("ab", "base", {"label": "b"}, "base.ref is missing", ("report", "merge")),
    # a `harness run` JSON: what compare, export and history read
    ("run", "runs.0.requests", [{}], "runs[0].requests[0].phase is missing", ("export",)),
    ("run", "runs.0.requests.0.itl_ms", "x", "runs[0].requests[0].itl_ms is 'x'", RUN_VERBS),
    ("run", "runs.0.requests.0.prompt_tokens", -1, "requests[0].prompt_tokens is -1", RUN_VERBS),
    ("run", "runs.0.requests.0.end", None, "requests[0].end is missing", ("export",)),
    ("run", "runs.0.requests.0.send", [], "runs[0].requests[0].send is []", RUN_VERBS),
    ("run", "runs.0.started_at", "yesterday", "runs[0].started_at is 'yesterday'", RUN_VERBS),
    ("run", "runs.0.workload.phases", 5, "runs[0].workload.phases is 5", RUN_VERBS),
    ("run", "runs.0.server", "x", "runs[0].server is 'x'", RUN_VERBS),
    ("run", "runs.0.fingerprint", [{}], "runs[0].fingerprint is [{}]", RUN_VERBS),
    ("run", "runs.0.suite", "x", "runs[0].suite is 'x'", RUN_VERBS),
    ("run", "runs.0.suite.gate", 5, "runs[0].suite.gate is 5", RUN_VERBS),
    ("run", "runs.0.summary.ttft_p95_ms", float("inf"), "ttft_p95_ms is inf", RUN_VERBS),
    ("run", "runs.0.summary.ttft_p50_ms", -20.0, "ttft_p50_ms is -20.0", RUN_VERBS),
    ("run", "runs.0.summary.errors", -1, "summary.errors is -1", RUN_VERBS),
    *[  # the memory peaks, which the min/max memory rule gates: each value a byte count
        ("run", f"runs.0.summary.{name}", value, f"{name} is {value!r}", RUN_VERBS)
        for name in ("peak_rss_bytes", "peak_device_bytes", "startup_peak_rss_bytes")
        for value in (float("nan"), -2.0e8, "2e8", float("inf"))
    ],
    ("ab", "rounds.0.head.summary.peak_rss_bytes", -1, "peak_rss_bytes is -1", AB_VERBS),
    ("ab", "rounds.0.base.summary.peak_device_bytes", float("nan"),
     "base.summary.peak_device_bytes is nan", AB_VERBS),
    ("ab", "rounds.0.head.server.startup_peak_rss_bytes", -5,
     "head.server.startup_peak_rss_bytes is -5", AB_VERBS),
    ("run", "arm.commit", ["a"], "arm.commit is ['a']", ("history",)),
    ("run", "arm.depth", "3", "arm.depth is '3'", ("history",)),
    # a sweep's and a bisect's result: what merge reads
    ("sweep", "judgement.exit_code", 7, "judgement.exit_code is 7", ("merge",)),
    ("sweep", "judgement", "x", "judgement is 'x'", ("merge",)),
    ("sweep", "judgement.levels.c1.metrics", [{}], "metrics[0].name is missing", ("merge",)),
    ("sweep", "judgement.levels.c1.metrics.0", {"name": "tok_s", "verdict": "PASS"},
     "c1.metrics[0].ratio is missing", ("merge",)),
    ("bisect", "culprit", {"short": 5, "subject": "x"}, "culprit.short is 5", ("merge",)),
    # a verdict merge would show in a pull request and write as a step output
    ("ab", "comparison.verdict", "<b>PASS</b>\x1b[2J", "is not a result servegate writes",
     ("merge",)),
    ("ab", "comparison.verdict", "PASS\nverdict=PASS", "is not a result servegate writes",
     ("merge",)),
    ("ab", "comparison.exit_code", 1, "is not a result servegate writes", ("merge",)),
    ("sweep", "judgement.verdict", "OK", "is not a result servegate writes", ("merge",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "field", "value", "needle", "verbs"),
    MALFORMED,
    ids=[f"{kind}-{field}={value!r}"[:60] for kind, field, value, _, _ in MALFORMED],
)
def test_a_malformed_saved_result_is_one_line_naming_the_field(
    tmp_path, ab_doc, kind, field, value, needle, verbs
):
    doc = {"ab": ab_doc, "run": run_json(), "sweep": sweep_doc(ab_doc), "bisect": BISECT}[kind]
    folder = tmp_path / "h"
    bad = write(folder / "x.json", mutate(doc, field, value))
    good = write(tmp_path / "good.json", run_json(SHA_B, 2))
    for verb in verbs:
        if verb == "history":  # the one file is skipped, naming it and the field
            out = cli("history", str(folder), cwd=tmp_path)
            assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
            (skip,) = [line for line in out.stderr.splitlines() if line.startswith("skipped:")]
            assert skip.startswith("skipped: x.json: ") and needle in skip, skip
            continue
        args = {
            "report": ["report", str(bad), "--out-dir", str(tmp_path / "r")],
            "compare": ["compare", str(good), str(bad), "--out-dir", str(tmp_path / "c")],
            "merge": ["merge", str(bad)],
            "export": ["export", str(bad), "--out", str(tmp_path / "e.json")],
        }[verb]
        out = cli(*args, cwd=tmp_path)
        one_line_error(out, needle)
        assert str(bad) in out.stderr, out.stderr


def test_one_bad_file_in_a_history_is_skipped_and_named(tmp_path, ab_doc):
    folder = tmp_path / "h"
    for depth, sha in enumerate(("1" * 40, "2" * 40, "3" * 40), start=1):
        write(folder / f"{sha[:4]}.json", run_json(sha, depth))
    write(folder / "sub" / "broken.json", mutate(run_json("4" * 40, 4), "arm.depth", "4"))
    write(folder / "ab.json", mutate(ab_doc, "comparison.exit_code", -7))
    for verb in ("history", "publish"):
        extra = ["--out", str(tmp_path / "site")] if verb == "publish" else []
        out = cli(verb, str(folder), *extra, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        lines = out.stderr.splitlines()
        assert len(lines) == 2, out.stderr
        assert lines[0].startswith("skipped: ab.json: comparison.exit_code is -7"), lines
        assert lines[1].startswith("skipped: sub/broken.json: arm.depth is '4'"), lines
    history = cli("history", str(folder), cwd=tmp_path)
    assert "ttft_p50_ms: 3 commit(s)" in history.stdout, history.stdout


# ---------------------------------------------------------------- cost models, ready_path


def cost_model(decode_rows: float) -> dict:
    return {
        "name": "t", "source": "test", "model": "smollm2-135m",
        "coefficients": {"prefill": [0.01, 1e-5, 1e-8], "prefill_batched": [0.01, 1e-5, 1e-8],
                         "decode": [0.004, decode_rows, 1e-6, 0.001]},
    }  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "value", [float("nan"), -0.5, float("inf"), 1e308], ids=["nan", "neg", "inf", "huge"]
)
@pytest.mark.parametrize("verb", ["sim-run", "ab", "sweep"])
def test_a_cost_model_that_would_never_end_is_refused(tmp_path, value, verb):
    costs = write(tmp_path / "costs.json", cost_model(value))
    args = {
        "sim-run": ["sim", "run", "--suite", "smoke", "--costs", str(costs)],
        "ab": ["ab", "--sim", str(costs)],
        "sweep": ["sweep", "--sim", str(costs), "--levels", "1,2"],
    }[verb]
    one_line_error(cli(*args, cwd=tmp_path), f"{costs}: coefficients.decode[1] is {value!r}")


@pytest.mark.parametrize("value", [float("nan"), -0.5], ids=["nan", "neg"])
def test_the_engine_refuses_such_a_cost_model_too(tmp_path, value):
    from engine.sim.cost_file import load_costs

    costs = write(tmp_path / "costs.json", cost_model(value))
    with pytest.raises(ValueError, match=r"coefficients\.decode\[1\] is"):
        load_costs(str(costs))
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ValueError, match="not a regular file"):
        load_costs(str(tmp_path / "fifo.json"))


@pytest.mark.parametrize(
    "ready", ["../../x", "/../x", "//evil.example/x", "http://evil/x", "/he alth", "/a\x01", "x"]
)
def test_a_ready_path_that_is_no_path_on_the_server_is_refused(tmp_path, ready):
    path = tmp_path / "servegate.toml"
    path.write_text(f'[server]\nserve = "x --port {{port}}"\nready_path = {json.dumps(ready)}\n')
    with pytest.raises(ProjectError, match="ready_path .* must be a path on the server"):
        load_project(path)


def test_a_ready_path_is_refused_before_anything_runs(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "servegate.toml").write_text(
        '[server]\nserve = "x --port {port}"\nready_path = "../../x"\n'
    )
    out = cli("run", "--suite", "smoke", "--dry-run", cwd=tmp_path)
    one_line_error(out, "servegate.toml: [server] ready_path '../../x' must be a path")


# ---------------------------------------------------------------- strict JSON out


def strict(text: str) -> object:
    def refuse(name):
        raise ValueError(f"bare {name} in the output")

    return json.loads(text, parse_constant=refuse)


def test_export_writes_strict_json_when_a_value_is_past_floats_range(tmp_path):
    doc = run_json()
    for run in doc["runs"]:
        for req in run["requests"]:
            req["itl_ms"] = [1e308, 1e308, 1e308]  # finite, but their mean's sum is not
    src = write(tmp_path / "run.json", doc)
    out = cli("export", str(src), "--out", str(tmp_path / "v.json"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for path in tmp_path.glob("v*.json"):
        got = strict(path.read_text())
        assert got["mean_itl_ms"] is None and got["completed"] == 3


def test_strict_json_saves_what_is_not_finite_as_null():
    from harness.files import strict_json

    text = strict_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": (float("-inf"),)})
    assert strict(text) == {"a": None, "b": [None, 1.5], "c": [None]}


def test_merge_reads_a_sweep_whose_rounds_is_a_count(tmp_path, ab_doc):
    doc = sweep_doc(ab_doc) | {
        "rounds": 3,
        "runs": [{"round": 1, "run": {"machine": MACHINE, "summary": {}}}],
    }
    out = cli("merge", str(write(tmp_path / "sweep.json", doc)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "| s | Test CPU x2 | c1: " in out.stdout, out.stdout


@pytest.mark.parametrize("shape", ["list", "one run", "runs"])
def test_every_shape_of_saved_runs_still_compares(tmp_path, shape):
    runs = run_json()["runs"]
    doc = {"list": runs, "one run": runs[0], "runs": {"runs": runs}}[shape]
    a, b = write(tmp_path / "a.json", doc), write(tmp_path / "b.json", doc)
    out = cli("compare", str(a), str(b), "--out-dir", str(tmp_path / "c"), cwd=tmp_path)
    assert out.returncode in (0, 1) and "rror" not in out.stderr, out.stderr
    assert len(list((tmp_path / "c").glob("*.md"))) == 1


@pytest.mark.timeout(60)
def test_a_fifo_or_a_link_as_merges_outputs_is_refused_not_opened(tmp_path, ab_doc, monkeypatch):
    result = write(tmp_path / "ab.json", ab_doc)
    os.mkfifo(tmp_path / "summary.md")
    out = cli("merge", str(result), "--summary", str(tmp_path / "summary.md"), cwd=tmp_path)
    one_line_error(out, "not a regular file")
    os.mkfifo(tmp_path / "outputs")
    (tmp_path / "link.md").symlink_to(tmp_path / "elsewhere.md")
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "outputs"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "link.md"))
    out = cli("merge", str(result), cwd=tmp_path)  # neither blocks nor follows
    assert out.returncode == ab_doc["comparison"]["exit_code"], out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and not (tmp_path / "elsewhere.md").exists(), out.stderr


def test_merge_takes_an_undecided_result_its_team_fails(tmp_path, ab_doc):
    # INCONCLUSIVE exits 0, or 1 where the team chose --inconclusive fail: both written by us
    doc = mutate(mutate(ab_doc, "comparison.verdict", "INCONCLUSIVE"), "comparison.exit_code", 1)
    out = cli("merge", str(write(tmp_path / "r.json", doc)), cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "INCONCLUSIVE" in out.stdout
