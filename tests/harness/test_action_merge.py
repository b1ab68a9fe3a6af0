"""The action's merge step (action/merge.sh) on its own, as a runner runs it: a suite that
wrote no result (it crashed before writing) makes the step's exit code 2 and its verdict
INVALID, so the pull request's check fails instead of passing on the suites that did."""

from __future__ import annotations

import subprocess

from helpers import REPO


def merge_step(tmp_path, codes: str, base: str = "main") -> tuple[dict, str, str]:
    out = tmp_path / "out"
    (out / "chat").mkdir(parents=True, exist_ok=True)
    (out / "codes.tsv").write_text(codes)
    files = {name: tmp_path / name for name in ("output", "env", "summary")}
    env = {
        "PATH": "/usr/bin:/bin",
        "SERVEGATE_OUT": str(out),
        "SERVEGATE_BASE": base,
        "SERVEGATE_BIN": str(tmp_path / "no-harness"),  # never called: no result to merge
        "GITHUB_OUTPUT": str(files["output"]),
        "GITHUB_ENV": str(files["env"]),
        "GITHUB_STEP_SUMMARY": str(files["summary"]),
    }
    done = subprocess.run(["bash", str(REPO / "action" / "merge.sh")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    outputs = dict(
        line.split("=", 1) for line in files["output"].read_text().splitlines() if "=" in line
    )
    return outputs, files["env"].read_text(), (out / "merged.md").read_text()


def test_a_suite_that_wrote_no_result_fails_the_step(tmp_path):
    outputs, env, merged = merge_step(tmp_path, "chat\t1\n")
    assert (outputs["verdict"], outputs["exit-code"]) == ("INVALID", "2")
    assert "SERVEGATE_CODE=2" in env.splitlines()
    assert "Suite `chat` wrote no result (exit 1)" in merged


def test_without_a_base_nothing_is_judged_and_nothing_fails(tmp_path):
    (tmp_path / "out" / "chat").mkdir(parents=True)
    (tmp_path / "out" / "chat" / "r.json").write_text("{}")
    outputs, env, _ = merge_step(tmp_path, "chat\t0\n", base="")
    assert (outputs["verdict"], outputs["exit-code"]) == ("", "0")
    assert "SERVEGATE_CODE=0" in env.splitlines()
