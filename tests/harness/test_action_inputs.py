"""The action's steps given hostile inputs, run as a runner runs them (bash, the step's env
vars, the GitHub files) in a throwaway repository: a newline cannot add a variable to
$GITHUB_ENV, a ref or a path cannot be an option to git or realpath, a bad budget or an
unbalanced quote in `args` is one line and INVALID, a glob in `args` stays itself, and the
comment is found by its marker and its author, never another user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers.actions_runner import FAKE_GH, Runner, read_env


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()  # fmt: skip


@pytest.fixture
def job(tmp_path):
    """A repository with two commits, and the files a runner gives a step."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "servegate.toml").write_text("[server]\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    out, temp, event = tmp_path / "out", tmp_path / "temp", tmp_path / "event.json"
    out.mkdir(), temp.mkdir()
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    files = {k: tmp_path / k for k in ("env", "output", "summary")}
    for f in files.values():
        f.touch()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SERVEGATE_OUT": str(out),
           "RUNNER_TEMP": str(temp), "GITHUB_EVENT_PATH": str(event),
           "GITHUB_EVENT_NAME": "push", "SERVEGATE_BIN": str(Path(sys.executable).parent),
           "GITHUB_ENV": str(files["env"]), "GITHUB_OUTPUT": str(files["output"]),
           "GITHUB_STEP_SUMMARY": str(files["summary"])}  # fmt: skip
    return repo, env, files, out


def step(script: str, repo: Path, env: dict, **inputs: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "action" / script)], cwd=repo, env=env | inputs,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def judge(repo, env, **inputs):
    given = {"BASE": "main~1", "HEAD_REF": "HEAD", "PROJECT": "servegate.toml",
             "SUITES": "smoke"} | inputs  # fmt: skip
    return step("judge.sh", repo, env, **given)


def one_error(done: subprocess.CompletedProcess, said: str) -> None:
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
    assert done.returncode == 2 and len(errors) == 1 and said in errors[0], done.stdout


def test_clean_inputs_are_written_whole(job):
    repo, env, files, _ = job
    done = judge(repo, env)
    assert done.returncode == 0, done.stderr
    written = read_env(files["env"])
    assert written["SERVEGATE_BASE"] == git(repo, "rev-parse", "main~1")
    assert written["SERVEGATE_PR"] == "7"
    assert written["SERVEGATE_PROJECT"].endswith("/servegate-judge/servegate.toml")  # the base's


@pytest.mark.parametrize("name", ["BASE", "HEAD_REF", "PROJECT", "SUITES"])
def test_a_control_character_in_an_input_is_refused_before_any_use(job, name):
    repo, env, files, _ = job
    evil = "main\nBASH_ENV=/tmp/evil\n::error::forged" if name != "SUITES" else "smoke\x1b[2J"
    done = judge(repo, env, **{name: evil})
    one_error(done, "holds a control character: refused")
    assert files["env"].read_text() == ""  # nothing written, BASH_ENV least of all


@pytest.mark.parametrize("name", ["BASE", "HEAD_REF", "PROJECT"])
def test_an_option_for_a_ref_or_a_path_is_refused(job, name, tmp_path):
    repo, env, files, _ = job
    target = tmp_path / "pwned"
    done = judge(repo, env, **{name: f"--output={target}"})
    one_error(done, "starts with '-': refused")
    assert not target.exists() and files["env"].read_text() == ""


def test_suites_are_never_globbed(job):
    repo, env, _, out = job
    (repo / "a.toml").write_text("")
    done = judge(repo, env, SUITES="*.toml")
    assert done.returncode == 0, done.stderr
    name, path = (out / "suites.tsv").read_text().rstrip("\n").split("\t")
    assert name == "_" and path.endswith("/*.toml")  # the one pattern, unexpanded


@pytest.mark.parametrize(
    "inputs, said",
    [({"BUDGET_MINUTES": "x"}, "'budget-minutes' must be a number of minutes above 0"),
     ({"BUDGET_MINUTES": "0"}, "'budget-minutes' must be a number of minutes above 0"),
     ({"BUDGET_MINUTES": "-5"}, "'budget-minutes' must be a number of minutes above 0"),
     ({"ARGS": "--head-flags \"--max-num-seqs 8"}, "'args' cannot be split as a shell would"),
     ({"INCONCLUSIVE": "maybe"}, "'inconclusive' must be pass or fail")],
)  # fmt: skip
def test_a_bad_budget_or_args_is_one_line_and_invalid(job, inputs, said):
    repo, env, files, out = job
    (out / "suites.tsv").write_text("smoke\tsmoke\n")
    done = step("gate.sh", repo, env | {"SERVEGATE_BASE": "x", "SERVEGATE_HEAD": "y"},
                **({"BUDGET_MINUTES": "", "ARGS": ""} | inputs))  # fmt: skip
    (error,) = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
    assert said in error and done.returncode == 0, done.stdout  # the merge step fails it
    assert said in read_env(files["env"])["SERVEGATE_INVALID"]
    assert (out / "codes.tsv").read_text() == ""  # no suite ran


def test_args_are_split_as_a_shell_would_and_never_globbed(job, tmp_path):
    repo, env, _, out = job
    (out / "suites.tsv").write_text("smoke\tsmoke\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "argv.json"
    record = f"import json, sys\njson.dump(sys.argv[1:], open({str(seen)!r}, 'w'))\n"
    (bin_dir / "harness").write_text(f"#!{sys.executable}\n{record}")
    (bin_dir / "harness").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    (repo / "x.toml").write_text("")
    args = "--head-flags \"--max-num-seqs 8\" '*.toml'"
    done = step("gate.sh", repo, env | {"SERVEGATE_BASE": "b", "SERVEGATE_HEAD": "h",
                                         "SERVEGATE_BIN": str(bin_dir)},
                BUDGET_MINUTES="", ARGS=args, INCONCLUSIVE="fail")  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = json.loads(seen.read_text())
    assert argv[-3:] == ["--head-flags", "--max-num-seqs 8", "*.toml"]
    assert argv[argv.index("--inconclusive") + 1] == "fail"  # the input reaches every A/B


def test_the_comment_is_ours_by_marker_and_author(job, tmp_path):
    repo, env, _, out = job
    (out / "merged.md").write_text("### servegate: PASS\n")
    (out / "suites.tsv").write_text("smoke\tsmoke\n")
    marker = "<!-- servegate: smoke -->"
    state = tmp_path / "gh.json"
    foreign = {"id": 5, "issue": 7, "body": f"gotcha\n{marker}", "user": "mallory"}
    state.write_text(json.dumps({"comments": [foreign], "calls": []}))
    bin_dir = tmp_path / "ghbin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH.format(python=sys.executable))
    (bin_dir / "gh").chmod(0o755)
    env = env | {"PATH": f"{bin_dir}:{env['PATH']}", "FAKE_GH_STATE": str(state),
                 "GITHUB_REPOSITORY": "team/server", "SERVEGATE_PR": "7"}  # fmt: skip
    for _ in range(2):
        done = step("comment.sh", repo, env, COMMENT="true")
        assert done.returncode == 0, done.stderr
    comments = json.loads(state.read_text())["comments"]
    assert comments[0] == foreign  # untouched
    (ours,) = comments[1:]  # posted once, then updated in place
    assert ours["user"] == "github-actions[bot]" and ours["body"].rstrip().endswith(marker)
    methods = [c["method"] for c in json.loads(state.read_text())["calls"]]
    assert methods == ["GET", "POST", "GET", "PATCH"]


@pytest.mark.parametrize(
    "inputs, said",
    [
        ({"base": "main\nBASH_ENV=/tmp/evil"}, "holds a control character"),
        ({"head": "--output=PWNED"}, "starts with '-'"),
        ({"project": "--help"}, "starts with '-'"),
    ],  # fmt: skip
)
def test_the_whole_action_stops_at_a_hostile_input(job, tmp_path, inputs, said):
    repo, _, _, _ = job
    runner = Runner(tmp_path, repo)
    given = {"harness": str(Path(sys.executable).with_name("harness"))} | inputs
    event = {"pull_request": {"number": 7, "base": {"ref": "main"}}}
    run = runner.run(REPO, given, "pull_request", event)
    assert run.exit_code == 2 and said in run.log, run.log
    assert run.steps_run[-1] == "the judge from the base branch"
    assert "BASH_ENV" not in run.env and not list(repo.glob("PWNED*"))
    assert runner.gh_calls() == []
