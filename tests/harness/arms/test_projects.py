"""Gating another project's own commits through its servegate.toml: a throwaway repository with a
tiny server, a real build step and a seeded TTFT regression (20 -> 60 ms, certain on any
machine). `ab`, `bisect` and `sweep` name the culprit, a failed build is exit 2 with its log's
last line (and a skipped bisect step), and no commit is ever built twice."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from harness.arms.launcher import free_port

from helpers.arms import scripted
from helpers.cli import cli, client_starved, exit_agrees, harness
from helpers.processes import unique_marker, wait_no_survivors
from helpers.project_repo import ProjectRepo

BUILD_ERROR = "error: src/ttft_ms must be a whole number of milliseconds, got 'sixty'"
FAST = ("--suite", "suite.toml", "--quiet", "--rounds", "3", "--max-rounds", "5")


@pytest.fixture
def project(tmp_path):
    marker = unique_marker()
    repo = ProjectRepo(tmp_path, marker)
    yield repo
    assert not wait_no_survivors(marker), "a server outlived its run"


def verdicts(result: dict) -> dict[str, str]:
    return {m["name"]: str(m["verdict"]) for m in result["comparison"]["metrics"]}


def only_json(folder, pattern: str) -> dict:
    (path,) = folder.glob(pattern)
    return json.loads(path.read_text())


def starved(folder) -> bool:
    """Whether the machine starved the load client (helpers.cli.client_starved) in the runs kept
    under `folder` (each beside its server's log, by ab, bisect and sweep alike)."""
    return client_starved({"runs": [json.loads(p.read_text()) for p in folder.rglob("*.run.json")]})


def gated(project, out, *args, cache):
    """`harness ARGS --out-dir OUT`; once more into OUT-again where the machine starved the
    load client (INVALID for the machine, not the project). The folder judged is returned."""
    r = project.harness(*args, "--out-dir", str(out), cache=cache)
    if starved(out):
        out = out.with_name(f"{out.name}-again")
        r = project.harness(*args, "--out-dir", str(out), cache=cache)
    return r, out


@pytest.mark.timeout(900)
@pytest.mark.timing  # verdicts on scripted timings: alone under xdist
def test_ab_bisect_and_sweep_on_another_projects_commits_each_built_once(project, tmp_path):
    cache = tmp_path / "cache"
    harmless = project.commit("docs: say what the server does", readme="it streams")
    broken = project.commit("build: milliseconds as words", ttft="sixty")
    fixed = project.commit("build: milliseconds as digits again", ttft="20")
    culprit = project.commit("server: tokenize the prompt twice", ttft="60")
    project.commit("docs: mention the tokenizer", readme="it tokenizes")

    r, out = gated(project, tmp_path / "ab-culprit", "ab", "--base", f"{culprit}~1",
                   "--head", culprit, *FAST, cache=cache)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSION: ttft_p50_ms" in r.stdout and "verdict: REGRESSION" in r.stdout
    result = only_json(out, "*.json")
    assert result["head"]["commit"] == culprit and result["base"]["commit"] == fixed
    assert (
        result["head"]["cmd"].startswith(sys.executable)
        and "@build/server.args" in (result["head"]["cmd"])
    )

    r, out = gated(project, tmp_path / "ab-harmless", "ab", "--base", "main~5",
                   "--head", harmless, *FAST, cache=cache)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr  # an A/A: PASS, or INCONCLUSIVE on a noisy one
    assert "REGRESSION" not in verdicts(only_json(out, "*.json")).values()

    r = project.harness("ab", "--base", fixed, "--head", broken, *FAST, cache=cache)
    assert r.returncode == 2, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "build failed" in last and BUILD_ERROR in last
    assert f"build log: {BUILD_ERROR}" in r.stderr

    r, out = gated(project, tmp_path / "bisect", "bisect", "--good", "main~5", *FAST, cache=cache)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"first bad commit: {culprit} server: tokenize the prompt twice" in r.stdout
    data = only_json(out, "*-bisect-*.json")
    steps = [(s["head"]["sha"], s["mark"]) for s in data["path"] if s["role"] == "step"]
    assert steps[0] == (broken, "skip") and (culprit, "bad") in steps
    (skipped,) = data["skipped"]
    assert skipped["head"]["sha"] == broken and BUILD_ERROR in skipped["reason"]

    r, out = gated(project, tmp_path / "sweep", "sweep", "--base", fixed, "--head", culprit,
                   "--suite", "suite.toml", "--levels", "1,2", "--rounds", "3", "--quiet",
                   cache=cache)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    sweep = only_json(out, "*-sweep-*.json")
    assert sweep["arms"]["head"]["commit"] == culprit

    # six commits, each built once across two A/Bs, a failed build, a bisect and a sweep
    built = project.builds()
    assert set(built.values()) == {1}, built
    assert set(built) >= {harmless, fixed, culprit} and broken not in built  # it never finished
    assert len(list(cache.rglob("*.build-*.failed"))) == 1
    assert len(list(cache.rglob(f"{broken}.build-*.log"))) == 1

    # another build command is another build: the cache is keyed by the command too
    toml = project.path / "servegate.toml"
    toml.write_text(toml.read_text().replace('build = "', 'build = "true && '))
    r, _ = gated(project, tmp_path / "again", "ab", "--base", fixed, "--head", culprit, *FAST,
                 cache=cache)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert project.builds()[fixed] == 2 and project.builds()[culprit] == 2


def test_head_worktree_with_an_uncommitted_change_is_compared_against_head(project, tmp_path):
    project.commit("server: answer in 60 ms", ttft="60")
    (project.path / "src" / "ttft_ms").write_text("20\n")  # not committed
    r, out = gated(project, tmp_path / "out", "ab", "--head", "WORKTREE", *FAST,
                   cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    result = only_json(out, "*.json")
    head_sha = project.git("rev-parse", "HEAD")
    assert (
        result["base"]["commit"] == head_sha and result["base"]["label"] == f"HEAD@{head_sha[:8]}"
    )
    assert result["head"]["label"] == f"WORKTREE@{head_sha[:8]}+dirty"
    assert verdicts(result)["ttft_p50_ms"] == "IMPROVEMENT"


def test_two_running_servers_given_by_url_get_a_verdict(tmp_path):
    marker = unique_marker()
    base, head = free_port(), free_port()
    procs = [
        subprocess.Popen([sys.executable, *scripted_argv(ttft, port, marker)])
        for ttft, port in ((20, base), (60, head))
    ]
    try:
        suite = ProjectRepo(tmp_path, marker).path / "suite.toml"  # any folder: no git needed
        suite.write_text(suite.read_text() + "peak_rss_bytes = 0.05\n")
        for out in (tmp_path / "out", tmp_path / "out-again"):
            r = harness(
                "ab", "--suite", str(suite), "--quiet",
                "--base-url", f"http://127.0.0.1:{base}", "--head-url", f"http://127.0.0.1:{head}",
                "--rounds", "3", "--max-rounds", "5", "--out-dir", str(out), cwd=tmp_path,
            )  # fmt: skip
            if not client_starved(only_json(out, "*.json")):  # else the machine's: once more
                break
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert r.returncode == 1, r.stdout + r.stderr
    result = only_json(out, "*.json")
    assert verdicts(result)["ttft_p50_ms"] == "REGRESSION"
    assert result["base"]["label"] == f"http://127.0.0.1:{base}"
    assert "error" not in r.stderr, r.stderr
    report = next(out.glob("*.md")).read_text()
    assert "host memory is not gated: no pid for base" in report
    assert "peak_rss_bytes" not in result["gate"]


def scripted_argv(ttft: int, port: int, marker: str) -> list[str]:
    argv = scripted(f"--ttft-ms {ttft}", model=marker).split()
    return [a.replace("{port}", str(port)) for a in argv[1:]]


def test_an_api_key_reaches_every_request_and_a_missing_one_is_said_at_once(tmp_path):
    marker = unique_marker()
    suite = ProjectRepo(tmp_path, marker).path / "suite.toml"
    keyfile = tmp_path / "key.args"  # the servers read their key from a file: no report shows it
    keyfile.write_text("--api-key\ns3cret\n")
    arms = ["--base-cmd", scripted(f"@{keyfile}", model=marker),
            "--head-cmd", scripted(f"@{keyfile} --tag b", model=marker)]  # fmt: skip
    ab = ["ab", "--suite", str(suite), "--quiet", "--rounds", "2", "--max-rounds", "2",
          "--out-dir", str(tmp_path / "out"), *arms]  # fmt: skip
    keyed = harness(*ab, cwd=tmp_path, env={"OPENAI_API_KEY": "s3cret"})
    result = only_json(tmp_path / "out", "*.json")
    exit_agrees(keyed, result)  # an A/A on real timings: its verdict is not the subject
    assert result["rounds"][0]["base"]["summary"]["errors"] == 0
    assert result["rounds"][0]["head"]["arm"]["api_key"] == "set"
    assert "s3cret" not in json.dumps(result)
    started = time.monotonic()
    bare = harness(*ab, cwd=tmp_path, env={"OPENAI_API_KEY": None})  # the key unset
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert "HTTP 401: it wants an API key" in bare.stdout + bare.stderr
    assert time.monotonic() - started < 120  # said at the first start, not at the 180 s timeout
    assert not wait_no_survivors(marker)


def test_engine_flags_in_a_suite_never_reach_another_server(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository here
    with_flags = scripted("{flags}")
    for verb in (["ab", "--base-cmd", with_flags, "--head-cmd", with_flags],
                 ["sweep", "--serve-cmd", with_flags, "--levels", "1,2"]):  # fmt: skip
        out = cli(*verb, "--suite", "short-concurrency", "--dry-run", cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        planned = [line for line in out.stdout.splitlines() if "| flags: " in line]
        assert planned and all(line.endswith("| flags: (none)") for line in planned), planned
    out = cli("ab", "--base-cmd", with_flags, "--head-cmd", with_flags, "--suite", "smoke",
              "--head-flags", "--ttft-ms 9", "--dry-run", cwd=tmp_path)  # fmt: skip
    base, head = [line for line in out.stdout.splitlines() if "| flags: " in line]
    assert base.endswith("| flags: (none)") and head.endswith("| flags: --ttft-ms 9")


def test_errors_name_the_option_that_was_typed(tmp_path):
    out = cli("ab", "--base-cmd", "srv --port 80", "--head-cmd", scripted(), cwd=tmp_path)
    assert out.returncode == 2 and "--base-cmd must contain {port}" in out.stderr
    out = cli("ab", "--base-cmd", scripted(), "--head-cmd", "srv {port} {gpu}", cwd=tmp_path)
    assert out.returncode == 2 and "--head-cmd: unknown placeholder(s) ['gpu']" in out.stderr
    out = cli("ab", "--base-cmd", scripted(), "--head-url", "localhost:1", cwd=tmp_path)
    assert out.returncode == 2 and "--head-url must start with http://" in out.stderr


@pytest.mark.timeout(120)
def test_a_build_that_never_ends_is_stopped_at_its_timeout(tmp_path):
    # a build step (and a child of it, in its process group) that would run for ten minutes:
    # stopped at the project file's build_timeout, exit 2 naming the limit, the log's tail shown
    marker = unique_marker()
    repo = ProjectRepo(tmp_path, marker)
    code = f"import time; print('compiling {marker}', flush=True); time.sleep(600)"
    sleeper = f'{{python}} -c \\"{code}\\"'
    (repo.path / "servegate.toml").write_text(
        "[server]\nbuild_timeout = 2\n"
        f'build = "{sleeper} & {sleeper}; {{python}} build.py"\n'
        'serve = "{python} server.py --port {port} --model {model} @build/server.args"\n'
    )
    repo.git("commit", "-qam", "a build that never ends")
    started = time.monotonic()
    r = repo.harness("run", "--ref", "HEAD", "--suite", "suite.toml", "--quiet",
                     cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert time.monotonic() - started < 60  # ~3 s on a loaded machine; the build sleeps 600 s
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "build timed out after 2 s" in last, r.stderr
    assert "build_timeout" in last and f"build log: compiling {marker}" in r.stderr, r.stderr
    assert not wait_no_survivors(marker), "a build outlived its timeout"
    # a limit is not a verdict on the commit: nothing remembers it as a failed build
    assert not list((tmp_path / "cache").rglob("*.failed"))


def test_build_timeout_is_seconds_above_zero(tmp_path):
    from harness.arms.project import BUILD_TIMEOUT_S, ProjectError, parse_project
    from harness.workload.schema import SchemaError

    serve = {"serve": "s --port {port}"}
    assert parse_project({"server": serve}, tmp_path / "f").build_timeout == BUILD_TIMEOUT_S
    assert parse_project({"server": serve | {"build_timeout": 90}}, tmp_path).build_timeout == 90
    for bad in (0, -1, float("nan"), float("inf"), True, "600"):
        with pytest.raises((ProjectError, SchemaError), match="build_timeout"):
            parse_project({"server": serve | {"build_timeout": bad}}, tmp_path / "f")
