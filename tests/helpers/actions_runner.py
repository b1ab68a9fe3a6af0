"""A composite GitHub Action run as a runner runs it: `action.yml`'s steps in order, each a
bash script with the runner's variables ($GITHUB_ENV carried to later steps, a fresh
$GITHUB_OUTPUT per step, $GITHUB_STEP_SUMMARY, $GITHUB_EVENT_PATH), a failed step skipping the
rest; and a recording `gh` on PATH that keeps a pull request's comments in a JSON file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
FAKE_GH = '''#!{python}
"""gh, recording: `gh api` on a pull request's comments (list, POST, PATCH)."""
import json, os, sys
state_file = os.environ["FAKE_GH_STATE"]
state = {{"comments": [], "calls": []}}
if os.path.exists(state_file):
    state = json.load(open(state_file))
args = sys.argv[1:]
assert args[0] == "api", args
method = args[args.index("-X") + 1] if "-X" in args else "GET"
path = next(a for a in args[1:] if a.startswith("repos/"))
body = None
if "-F" in args:
    key, _, value = args[args.index("-F") + 1].partition("=")
    body = open(value[1:]).read() if value.startswith("@") else value
state["calls"].append({{"method": method, "path": path, "body": body}})
if method == "GET":  # one page of the issue's comments, as the API lists them
    number = int(path.split("/")[-2])
    print(json.dumps([{{"id": c["id"], "body": c["body"], "user": {{"login": c["user"]}}}}
                      for c in state["comments"] if c["issue"] == number]))
elif method == "POST":
    number = int(path.split("/")[-2])
    state["comments"].append({{"id": 1000 + len(state["comments"]), "issue": number, "body": body,
                              "user": os.environ.get("FAKE_GH_USER", "github-actions[bot]")}})
elif method == "PATCH":
    (c,) = [c for c in state["comments"] if c["id"] == int(path.split("/")[-1])]
    c["body"] = body
json.dump(state, open(state_file, "w"))
'''


@dataclass
class ActionRun:
    exit_code: int
    outputs: dict[str, str]
    env: dict[str, str]  # what the steps put in $GITHUB_ENV
    step_summary: str
    log: str
    steps_run: list[str] = field(default_factory=list)


class Runner:
    """One job's machine: a workspace (the checkout), a temporary folder and a recording gh."""

    def __init__(self, tmp_path: Path, workspace: Path, repository: str = "team/server"):
        self.tmp, self.workspace, self.repository = tmp_path, workspace, repository
        self.bin = tmp_path / "runner-bin"
        self.bin.mkdir(exist_ok=True)
        self.gh_state = tmp_path / "gh-state.json"
        (self.bin / "gh").write_text(FAKE_GH.format(python=sys.executable))
        (self.bin / "gh").chmod(0o755)
        self.runs = 0

    def comments(self) -> list[dict]:
        return json.loads(self.gh_state.read_text())["comments"] if self.gh_state.exists() else []

    def gh_calls(self) -> list[dict]:
        return json.loads(self.gh_state.read_text())["calls"] if self.gh_state.exists() else []

    def run(self, action: Path, inputs: dict, event_name: str, event: dict, **env) -> ActionRun:
        self.runs += 1
        job = self.tmp / f"job-{self.runs}"
        temp = job / "temp"
        temp.mkdir(parents=True)
        spec = yaml.safe_load((action / "action.yml").read_text())
        assert spec["runs"]["using"] == "composite"
        given = {k: str(v["default"]) if "default" in v else "" for k, v in spec["inputs"].items()}
        unknown = set(inputs) - set(given)
        assert not unknown, f"inputs the action does not take: {unknown}"
        given |= {k: text(v) for k, v in inputs.items()}
        (job / "event.json").write_text(json.dumps(event))
        summary, env_file = job / "step_summary.md", job / "env"
        summary.touch()
        env_file.touch()
        base = {
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "HOME": os.environ.get("HOME", str(self.tmp)),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_ACTION_PATH": str(action),
            "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(job / "event.json"),
            "GITHUB_REPOSITORY": self.repository,
            "GITHUB_BASE_REF": event.get("pull_request", {}).get("base", {}).get("ref", ""),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_ENV": str(env_file),
            "RUNNER_TEMP": str(temp),
            "FAKE_GH_STATE": str(self.gh_state),
            "SERVEGATE_CACHE": os.environ.get("SERVEGATE_CACHE", str(self.tmp / "cache")),
        } | env
        context = {"inputs": given, "github": {"token": "fake-token"}, "steps": {}}
        log, steps_run, code = [], [], 0
        for i, step in enumerate(spec["runs"]["steps"]):
            assert step.get("shell") == "bash" and "if" not in step, step
            output = job / f"output-{i}"
            output.touch()
            step_env = {k: evaluate(str(v), context) for k, v in step.get("env", {}).items()}
            script = job / f"step-{i}.sh"
            script.write_text(evaluate(step["run"], context))
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self.workspace,
                env=base | read_env(env_file) | step_env | {"GITHUB_OUTPUT": str(output)},
                capture_output=True,
                text=True,
            )
            log.append(f"## {step['name']} (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
            steps_run.append(step["name"])
            if "id" in step:
                context["steps"][step["id"]] = {"outputs": read_env(output)}
            if proc.returncode:
                code = proc.returncode
                break
        outputs = {k: evaluate(v["value"], context) for k, v in spec["outputs"].items()}
        return ActionRun(
            code, outputs, read_env(env_file), summary.read_text(), "\n".join(log), steps_run
        )


def text(value) -> str:
    """An input as the runner passes it: YAML's true is "true"."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def evaluate(template: str, context: dict) -> str:
    """`${{ inputs.x }}`, `${{ github.token }}`, `${{ steps.id.outputs.x }}`: the only
    expressions the action may use, so the test runs what a runner would."""

    def one(match: re.Match) -> str:
        value = context
        for part in match.group(1).split("."):
            if value is None:  # a step that never ran (the job stopped before it): empty
                return ""
            assert isinstance(value, dict), f"unsupported expression: {match.group(0)}"
            value = value.get(part) if value is not context else value[part]
        return value if isinstance(value, str) else ""

    return EXPRESSION.sub(one, template)


def read_env(path: Path) -> dict[str, str]:
    """A $GITHUB_ENV or $GITHUB_OUTPUT file: `K=V` lines and `K<<DELIMITER` blocks."""
    values, lines = {}, path.read_text().splitlines()
    i = 0
    while i < len(lines):
        key, sep, value = lines[i].partition("=")
        if "<<" in lines[i] and (not sep or "<<" in key):
            key, delimiter = lines[i].split("<<", 1)
            end = lines.index(delimiter, i + 1)
            values[key], i = "\n".join(lines[i + 1 : end]), end + 1
            continue
        values[key] = value
        i += 1
    return values
