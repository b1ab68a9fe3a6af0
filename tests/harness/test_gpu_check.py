"""The prepared GPU check cannot run here (no GPU): its syntax holds, its dry run prints each
step's command, and what those commands name exists (the test folder, the scripts, the suite,
the extra it needs)."""

from __future__ import annotations

import re
import subprocess
import tomllib

from helpers import REPO

SCRIPT = REPO / "scripts" / "gpu_check.sh"


def test_the_gpu_check_is_valid_shell():
    assert subprocess.run(["sh", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_its_dry_run_prints_every_step_and_names_what_exists(tmp_path):
    r = subprocess.run(["sh", str(SCRIPT), "--dry-run", "h200", str(tmp_path / "out")],
                       cwd=REPO, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    steps = dict(re.findall(r"^\[([\w-]+)\] (.*)$", r.stdout, re.M))
    assert list(steps) == ["install", "shape-model", "machine", "cuda", "engine-tests", "aa",
                           "boundary-spill", "gpu-chat", "client-scaling", "roofline"]  # fmt: skip
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
    assert "ENGINE_DEVICE=cuda" in steps["engine-tests"] and (REPO / "tests" / "engine").is_dir()
    assert (REPO / "scripts" / "sim_gpu_check.sh").is_file()
    assert "--no-index" in steps["install"]  # the GPU machine has no package index
    assert (REPO / "scripts" / "shape_model.py").is_file()
    assert (REPO / "scripts" / "client_limits.py").is_file()
    assert (REPO / "suites" / "boundary-spill.toml").is_file()
    assert (REPO / "suites" / "lengths" / "azure-chat-2023.jsonl").is_file()  # gpu-chat's, tracked
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert {"gpu", "cuda"} <= set(extras["optional-dependencies"])
    assert "nvidia-ml-py" in " ".join(extras["optional-dependencies"]["gpu"])
