"""The GitHub Action (action.yml) run as a runner runs it, with the inputs of the workflow
docs/ci.md gives another repository, in a team's throwaway repository: a pull request that
slows its server fails the step with exit 1 and one REGRESSION comment; its next push loosens
servegate.toml and the suite and is still judged by the base branch's, updating that comment."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from helpers import REPO
from helpers.actions_runner import ActionRun, Runner
from helpers.cli import client_starved
from helpers.team_repo import PROJECT, SUITE, TeamRepo, args_text

HARNESS = str(Path(sys.executable).with_name("harness"))
QUICK = "--rounds 3 --max-rounds 3"  # the seeded 2x first token is plain in three rounds
PULL_REQUEST = {"pull_request": {"number": 7, "base": {"ref": "main"}}}


def docs_workflow() -> dict:
    """The workflow docs/ci.md tells another repository to save."""
    text = (REPO / "docs" / "ci.md").read_text()
    section = text.split("## Gate your repository with the GitHub Action", 1)[1]
    return yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])


def action_step(workflow: dict) -> dict:
    (step,) = [s for s in workflow["jobs"]["gate"]["steps"] if "/servegate@" in s.get("uses", "")]
    return step


def starved(paths: list[Path]) -> bool:
    """Whether a loaded machine starved the load client of the results at `paths` (INVALID
    for the machine, not the pull request: helpers.cli.client_starved)."""
    return any(p.is_file() and client_starved(json.loads(p.read_text())) for p in paths)


def gate_pull_request(runner: Runner, inputs: dict) -> ActionRun:
    """The action on the pull request; once more where the machine starved the client."""
    run = runner.run(REPO, inputs, "pull_request", PULL_REQUEST)
    if starved([Path(p) for p in run.outputs["results"].splitlines()]):
        run = runner.run(REPO, inputs, "pull_request", PULL_REQUEST)
    return run


def gh_methods(runner: Runner) -> list[str]:
    """The comment's calls so far: a POST at the first run, a PATCH at each later one."""
    return ["GET", "POST"] + ["GET", "PATCH"] * (runner.runs - 1)


def test_docs_workflow_gives_the_action_what_it_needs():
    workflow = docs_workflow()
    on = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true
    assert "pull_request" in on and workflow["concurrency"]["cancel-in-progress"] is True
    job = workflow["jobs"]["gate"]
    assert job["permissions"]["pull-requests"] == "write"
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert set(action_step(workflow)["with"]) <= set(action["inputs"])


@pytest.mark.slow
def test_pull_request_gated_by_its_base_branch(tmp_path):
    repo = TeamRepo(tmp_path)
    runner = Runner(tmp_path, repo.path)
    inputs = action_step(docs_workflow())["with"] | {"harness": HARNESS, "args": QUICK}

    repo.push(
        "slower", "server: 80 ms to the first token", {"server.args": args_text(ttft_ms="80")}
    )
    first = gate_pull_request(runner, inputs)
    assert first.exit_code == 1, first.log
    assert (first.outputs["verdict"], first.outputs["exit-code"]) == ("REGRESSION", "1")
    (comment,) = runner.comments()
    assert "REGRESSION" in comment["body"].splitlines()[0], comment["body"]
    assert comment["body"].splitlines()[0] in first.step_summary
    assert [c["method"] for c in runner.gh_calls()] == gh_methods(runner)
    assert len(first.outputs["reports"].splitlines()) == 1

    loosened = {  # the pull request's own judge would pass it: head forced back to 40 ms
        "perf/chat.toml": SUITE.replace("ttft_p50_ms = 0.15", "ttft_p50_ms = 10.0"),
        "servegate.toml": PROJECT.replace("@server.args", "@server.args --ttft-ms 40"),
    }
    repo.push("slower", "perf: a looser gate", loosened)
    second = gate_pull_request(runner, inputs)
    assert second.exit_code == 1, second.log
    assert second.outputs["verdict"] == "REGRESSION"
    (comment,) = runner.comments()  # the same comment, updated in place
    assert [c["method"] for c in runner.gh_calls()] == gh_methods(runner)
    body = comment["body"]
    assert "REGRESSION" in body.splitlines()[0] and body == runner.gh_calls()[-1]["body"]
    for judged in ("servegate.toml", "perf/chat.toml"):
        assert f"changes `{judged}`; it was judged by the base branch's" in body
    result = json.loads(Path(second.outputs["results"]).read_text())
    (ttft,) = [m for m in result["comparison"]["metrics"] if m["name"] == "ttft_p50_ms"]
    assert ttft["tolerance"] == 0.15
    assert all("--ttft-ms 40" not in result[arm]["cmd"] for arm in ("base", "head"))


@pytest.mark.slow
def test_push_records_the_history_of_main(tmp_path):
    repo = TeamRepo(tmp_path)
    runner = Runner(tmp_path, repo.path)
    inputs = action_step(docs_workflow())["with"] | {"harness": HARNESS}
    sha = repo.git("rev-parse", "HEAD")
    push = {"before": "0" * 40, "after": sha}
    run = runner.run(REPO, inputs, "push", push)
    ran = tmp_path / f"job-{runner.runs}" / "temp" / "servegate-history" / "chat" / f"{sha}.json"
    if run.exit_code == 2 and starved([ran]):  # the machine's, not the commit's: once more
        shutil.rmtree(ran.parents[1])  # its worktree, which the next job's prune forgets
        run = runner.run(REPO, inputs, "push", push)
    assert run.exit_code == 0, run.log
    assert run.outputs["verdict"] == "" and runner.gh_calls() == []  # no base given: no A/B
    kept = repo.git("ls-tree", "-r", "--name-only", "origin/servegate-history")
    assert kept.split() == [".gitignore", f"chat/{sha}.json"]  # fetched back by the push
    assert (Path(run.outputs["site"]) / "index.html").is_file()


def test_this_repository_gates_itself_through_its_own_action():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "servegate.yml").read_text())
    inputs = set(yaml.safe_load((REPO / "action.yml").read_text())["inputs"])
    uses = [s for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s]
    local = {s["uses"]: s["with"] for s in uses if s["uses"].startswith("./")}
    assert set(local) == {"./.judge", "./"}  # the gate: the base branch's action and harness
    assert all(set(given) <= inputs for given in local.values())
