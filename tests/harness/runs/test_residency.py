"""How many of a round's servers are up at once. One at a time is the default for command arms
and for a project file that does not say: a server that holds its device (a scripted stand-in
for vLLM on one GPU: a second instance on a held device exits as CUDA's out-of-memory) passes
its A/A; `--residency together` on that device is exit 2 naming the failed start. The rule is
a pure function of the arms and the option; this repository's file opts into together."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.arms.arms import make_arm
from harness.arms.project import ProjectError, parse_project
from harness.runs.plan import ArmPlan, together

from helpers import REPO
from helpers.arms import described, scripted
from helpers.cli import harness, saved_result, valid_attempt
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import SUITE, write_suite


def gpu_ab(tmp_path, *extra: str):
    marker = unique_marker()
    lock = tmp_path / "gpu0.lock"  # the one device both arms are placed on
    gpu = scripted(f"--device-lock {lock} --load-ms 1500 --ttft-ms 50 --tag", model=marker)
    suite = write_suite(tmp_path, SUITE.format(extra="[gate]\nttft_p50_ms = 0.5"))

    def attempt(n: int):
        out = tmp_path / f"out{n}"
        r = harness("ab", "--quiet", "--suite", str(suite), "--rounds", "2", "--max-rounds", "2",
                    "--base-cmd", f"{gpu} a", "--head-cmd", f"{gpu} b", "--out-dir", str(out),
                    *extra, cwd=tmp_path, cache=tmp_path / "cache")  # fmt: skip
        assert not wait_no_survivors(marker), "a server outlived the A/B"
        return r, saved_result(out)

    return valid_attempt(attempt)


def test_servers_that_hold_their_device_pass_one_at_a_time(tmp_path):
    r, result = gpu_ab(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr  # an A/A: PASS, or INCONCLUSIVE where noisy
    assert result["comparison"]["verdict"] in ("PASS", "INCONCLUSIVE")
    assert "out of memory" not in r.stdout + r.stderr
    assert all(rnd[arm]["valid"] for rnd in result["rounds"] for arm in ("base", "head"))


def test_together_on_one_device_is_invalid_naming_the_failed_start(tmp_path):
    r, _ = gpu_ab(tmp_path, "--residency", "together")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "crashed in round 1" in r.stdout and "CUDA out of memory" in r.stdout, r.stdout
    assert "fingerprints differ" not in r.stdout  # no run finished: no workload to tell apart


def plans(*residencies: str, url: bool = False) -> dict[str, ArmPlan]:
    arm = make_arm("m", serve_cmd="srv {port}")
    arms = {f"arm{i}": replace(arm, residency=r) for i, r in enumerate(residencies)}
    if url:
        arms["url"] = make_arm("m", url="http://127.0.0.1:9")
    return {n: ArmPlan(n, a, described(n)) for n, a in arms.items()}


@pytest.mark.parametrize(
    ("arms", "asked", "expected"),
    [
        (("one-at-a-time", "one-at-a-time"), None, False),
        (("together", "together"), None, True),
        (("together", "one-at-a-time"), None, False),  # every arm must say it may share
        (("together", "together"), "one-at-a-time", False),  # the option decides
        (("one-at-a-time", "one-at-a-time"), "together", True),
        (("together",), None, False),  # one server: nothing to overlap
    ],
)
def test_the_residency_rule(arms, asked, expected):
    assert together(plans(*arms), asked) is expected


def test_one_device_holds_one_server_at_a_time_unless_asked():
    both = plans("together", "together")
    assert together(both, None, ("0",)) is False  # the project file's together, one device
    assert together(both, "together", ("0",)) is True  # asked for: as asked
    assert together(both, None, ("0", "1")) is True


def test_an_arm_at_a_url_starts_nothing():
    assert together(plans("together", url=True)) is False


def test_the_project_file_says_it_and_is_checked(tmp_path):
    path = tmp_path / "servegate.toml"
    serve = {"serve": "srv --port {port}"}
    assert parse_project({"server": serve}, path).residency == "one-at-a-time"
    assert parse_project({"server": serve | {"residency": "together"}}, path).residency == (
        "together"
    )
    with pytest.raises(ProjectError, match="residency must be 'one-at-a-time' or 'together'"):
        parse_project({"server": serve | {"residency": "shared"}}, path)


def test_dry_run_says_how_many_servers_are_up(tmp_path):
    def dry(*args: str) -> str:
        r = harness("ab", "--dry-run", *args, cwd=REPO, timeout=120)
        assert r.returncode == 0, r.stderr
        return next(line for line in r.stdout.splitlines() if line.startswith("servers: "))

    cmd = scripted()
    assert dry("--base-cmd", cmd, "--head-cmd", cmd) == "servers: one-at-a-time"
    assert dry("--base", "HEAD", "--head", "HEAD") == "servers: together"  # servegate.toml
    assert dry("--base", "HEAD", "--head", "HEAD", "--residency", "one-at-a-time") == (
        "servers: one-at-a-time"
    )
