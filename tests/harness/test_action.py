"""The GitHub Action (action.yml) run as a runner runs it, with the inputs of the workflow
docs/ci.md gives another repository, in a team's throwaway repository: a pull request that
slows its server fails the step with exit 1 and one REGRESSION comment; its next push loosens
servegate.toml and the suite and is still judged by the base branch's, updating that comment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from helpers import REPO
from helpers.actions_runner import Runner
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
    first = runner.run(REPO, inputs, "pull_request", PULL_REQUEST)
    assert first.exit_code == 1, first.log
    assert (first.outputs["verdict"], first.outputs["exit-code"]) == ("REGRESSION", "1")
    (comment,) = runner.comments()
    assert "REGRESSION" in comment["body"].splitlines()[0], comment["body"]
    assert comment["body"].splitlines()[0] in first.step_summary
    assert [c["method"] for c in runner.gh_calls()] == ["GET", "POST"]
    assert len(first.outputs["reports"].splitlines()) == 1

    loosened = {  # the pull request's own judge would pass it: head forced back to 40 ms
        "perf/chat.toml": SUITE.replace("ttft_p50_ms = 0.15", "ttft_p50_ms = 10.0"),
        "servegate.toml": PROJECT.replace("@server.args", "@server.args --ttft-ms 40"),
    }
    repo.push("slower", "perf: a looser gate", loosened)
    second = runner.run(REPO, inputs, "pull_request", PULL_REQUEST)
    assert second.exit_code == 1, second.log
    assert second.outputs["verdict"] == "REGRESSION"
    (comment,) = runner.comments()  # the same comment, updated in place
    assert [c["method"] for c in runner.gh_calls()] == ["GET", "POST", "GET", "PATCH"]
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
    run = runner.run(REPO, inputs, "push", {"before": "0" * 40, "after": sha})
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
